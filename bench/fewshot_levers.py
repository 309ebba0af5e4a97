"""Issue 16, section 20.1: levers around `cea train`'s few-shot default, one at a time, in a hand-written loop.

The loop trains as the default does (softmax from the probe's head on unit vectors, 3 epochs at 5e-5, warmup 10 %,
linear decay, batches of 32, the label names among the texts) but with plain shuffled batches, and exposes what the
product does not (label smoothing, R-Drop, layer-wise lr decay, a head lr, WiSE-FT weight averaging). It prints the
trained head's and the refitted head's test accuracy (the latter is how a bundle classifies) and saves the embeddings
for post-hoc checks:

    OMP_NUM_THREADS=1 python bench/fewshot_levers.py banking77 --sample S --tag base --wise ""
    OMP_NUM_THREADS=1 python bench/fewshot_levers.py banking77 --sample S --tag rdrop --wise "" --rdrop 1.0
"""
import argparse
import copy
import os
import time

import numpy as np, torch, torch.nn.functional as F
from cea.data import load_dataset
from cea.data.dataset import few_shot
from cea.data.label_names import name_examples
from cea.encoders import load_encoder
from cea.evaluation.classification import encode
from cea.knn import fit_head
from cea.knn.search import normalize

p = argparse.ArgumentParser()
p.add_argument("dataset"); p.add_argument("--sample", type=int, default=0); p.add_argument("--epochs", type=float, default=3)
p.add_argument("--lr", type=float, default=5e-5); p.add_argument("--head-lr", type=float, default=0.0)
p.add_argument("--rdrop", type=float, default=0.0); p.add_argument("--smooth", type=float, default=0.0)
p.add_argument("--llrd", type=float, default=1.0); p.add_argument("--wise", default="0.5,0.7")
p.add_argument("--seed", type=int, default=-1); p.add_argument("--shots", type=int, default=8)
p.add_argument("--batch", type=int, default=32); p.add_argument("--wd", type=float, default=0.0)
p.add_argument("--freeze-head", action="store_true"); p.add_argument("--tag", default="")
p.add_argument("--out", default="bench/results/fewshot-levers")
a = p.parse_args()
seed = a.sample if a.seed < 0 else a.seed
torch.manual_seed(seed)
ds = load_dataset(a.dataset)
fr = few_shot(ds["train"], a.shots, a.sample) if a.shots else ds["train"]
names = name_examples(ds.labels, "auto")
texts = list(fr["text"]) + list(names["text"]); y = np.concatenate([fr["label"].to_numpy(), names["label"].to_numpy()]).astype(str)
model = load_encoder("all-MiniLM-L6-v2")
test_t = list(ds["test"]["text"]); ty = ds["test"]["label"].to_numpy().astype(str)
t0 = time.time()
x0 = normalize(encode(model, texts))
h0 = fit_head(x0, y)
classes = h0.classes; yi = torch.tensor(np.searchsorted(classes, y))
head = torch.nn.Linear(x0.shape[1], len(classes))
with torch.no_grad():
    head.weight.copy_(torch.tensor(h0.coef)); head.bias.copy_(torch.tensor(h0.intercept))
start = copy.deepcopy(model.state_dict())
# layer-wise lr decay: top layer lr, each lower layer x llrd, embeddings lowest
groups = []
layers = model[0].auto_model.encoder.layer; L = len(layers)
for i, layer in enumerate(layers):
    groups.append({"params": list(layer.parameters()), "lr": a.lr * a.llrd ** (L - 1 - i)})
groups.append({"params": list(model[0].auto_model.embeddings.parameters()), "lr": a.lr * a.llrd ** L})
rest = [p_ for n_, p_ in model.named_parameters() if ".encoder.layer." not in n_ and ".embeddings." not in n_]
if rest: groups.append({"params": rest, "lr": a.lr})
if not a.freeze_head:
    groups.append({"params": head.parameters(), "lr": a.head_lr or a.lr})
opt = torch.optim.AdamW(groups, weight_decay=a.wd)
per = int(np.ceil(len(texts) / a.batch)); steps = int(round(a.epochs * per)); warm = int(0.1 * steps)
sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: (s + 1) / warm if s < warm else max(0.0, (steps - s) / (steps - warm)))
model.train()
g = torch.Generator().manual_seed(seed)
step = 0
while step < steps:
    perm = torch.randperm(len(texts), generator=g)
    for i in range(0, len(texts), a.batch):
        if step >= steps: break
        idx = perm[i:i + a.batch]
        feats = model.tokenize([texts[j] for j in idx])
        logits = head(F.normalize(model(feats)["sentence_embedding"], dim=-1))
        loss = F.cross_entropy(logits, yi[idx], label_smoothing=a.smooth)
        if a.rdrop:
            logits2 = head(F.normalize(model(model.tokenize([texts[j] for j in idx]))["sentence_embedding"], dim=-1))
            loss = (loss + F.cross_entropy(logits2, yi[idx], label_smoothing=a.smooth)) / 2
            lp, lq = F.log_softmax(logits, -1), F.log_softmax(logits2, -1)
            loss = loss + a.rdrop * 0.5 * (F.kl_div(lp, lq, log_target=True, reduction="batchmean") + F.kl_div(lq, lp, log_target=True, reduction="batchmean"))
        opt.zero_grad(); loss.backward(); opt.step(); sched.step(); step += 1
train_s = time.time() - t0
model.eval()
tuned = copy.deepcopy(model.state_dict())
res = {}
x1 = normalize(encode(model, texts)); tx = normalize(encode(model, test_t))
res["joint"] = classes[(torch.tensor(tx) @ head.weight.detach().T + head.bias.detach()).argmax(1).numpy()]
h1 = fit_head(x1, y); res["refit"] = h1.predict(tx)
os.makedirs(a.out, exist_ok=True)
np.savez(f"{a.out}/emb-{a.dataset}-s{a.sample}-{a.tag}.npz", x0=x0, x1=x1, tx=tx, y=y, ty=ty)
fz = f"{a.out}/frozen-test-{a.dataset}.npy"
if not os.path.exists(fz):
    model.load_state_dict(start); np.save(fz, normalize(encode(model, test_t))); model.load_state_dict(tuned)
for al in [float(v) for v in a.wise.split(",") if v]:
    model.load_state_dict({k: al * tuned[k] + (1 - al) * start[k] if tuned[k].is_floating_point() else tuned[k] for k in tuned})
    xa = normalize(encode(model, texts)); txa = normalize(encode(model, test_t))
    res[f"wise{al}"] = fit_head(xa, y).predict(txa)
out = " ".join(f"{k} {100*np.mean(v==ty):.2f}" for k, v in res.items())
print(f"{a.dataset} s{a.sample} {a.tag} {out} train_s {train_s:.0f} steps {steps}", flush=True)
