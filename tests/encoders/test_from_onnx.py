import numpy as np
import pytest
import torch

from cea.encoders import load_encoder
from cea.encoders.from_onnx import bert_from_onnx, onnx_parameters, sentence_transformer_from_onnx
from cea.errors import CeaError


class Wrapped(torch.nn.Module):
    """A BERT under sentence-transformers' prefix (``model.0.auto_model.``), as the catalog's export has it."""

    def __init__(self, bert):
        super().__init__()
        self.model = torch.nn.ModuleList([torch.nn.Module()])
        self.model[0].auto_model = bert

    def forward(self, input_ids, attention_mask):
        return self.model[0].auto_model(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state


@pytest.fixture(scope="module")
def exported(tmp_path_factory, tiny_bert_dir):
    """The tiny BERT (2 blocks, 2 heads) exported by torch's TorchScript exporter, as the catalog's file was; every
    weight drawn at random first, as a trained model's are (the exporter keeps one copy of equal tensors, such as
    freshly initialised biases)."""
    from transformers import AutoTokenizer, BertModel

    bert = BertModel.from_pretrained(tiny_bert_dir).eval()
    torch.manual_seed(0)
    with torch.no_grad():
        for param in bert.parameters():
            param.copy_(torch.randn_like(param) * 0.1)
    ids = AutoTokenizer.from_pretrained(tiny_bert_dir)(
        ["my card is lost", "what is the capital city"], padding=True, return_tensors="pt"
    )
    path = tmp_path_factory.mktemp("onnx") / "model.onnx"
    with torch.no_grad():
        torch.onnx.export(
            Wrapped(bert).eval(),
            (ids["input_ids"], ids["attention_mask"]),
            str(path),
            input_names=["input_ids", "attention_mask"],
            output_names=["last_hidden_state"],
            dynamic_axes={"input_ids": {0: "b", 1: "s"}, "attention_mask": {0: "b", 1: "s"}},
            opset_version=17,
            dynamo=False,
        )
    return path, bert, ids


def test_every_weight_comes_back_in_pytorch_layout(exported):
    path, bert, _ = exported
    params = onnx_parameters(path)
    state = {
        name: tensor
        for name, tensor in bert.state_dict().items()
        if not name.endswith("position_ids") and not name.startswith("pooler.")
    }  # no pooler in last_hidden_state
    assert len(state) == 5 + 2 * 16  # the embeddings, and 16 tensors a block (six Linear layers, two LayerNorms)
    assert params.keys() == state.keys()
    for name, tensor in state.items():
        np.testing.assert_array_equal(params[name], tensor.numpy(), err_msg=name)


def test_the_rebuilt_bert_answers_as_the_original(exported):
    path, bert, ids = exported
    rebuilt = bert_from_onnx(path, heads=2)
    assert rebuilt.config.num_hidden_layers == 2 and rebuilt.config.hidden_size == 32
    assert not rebuilt.pooler.dense.weight.any()  # the export lacks it: zeroed
    with torch.no_grad():
        want = bert(**ids).last_hidden_state
        got = rebuilt(**ids).last_hidden_state
    torch.testing.assert_close(got, want, rtol=0, atol=1e-6)


def test_a_sentence_transformers_folder_with_mean_pooling(exported, tiny_bert_dir, tmp_path):
    path, bert, ids = exported
    folder = sentence_transformer_from_onnx(path, tiny_bert_dir, tmp_path / "st", heads=2, max_seq_length=24)
    model = load_encoder(str(folder))
    assert model.max_seq_length == 24
    with torch.no_grad():
        tokens = bert(**ids).last_hidden_state
    mask = ids["attention_mask"].unsqueeze(-1).float()
    want = ((tokens * mask).sum(1) / mask.sum(1)).numpy()
    got = model.encode(["my card is lost", "what is the capital city"])
    np.testing.assert_allclose(got, want, atol=1e-5)


def test_a_graph_that_is_no_bert_is_refused(tmp_path):
    path = tmp_path / "linear.onnx"
    torch.onnx.export(torch.nn.Linear(3, 2), (torch.zeros(1, 3),), str(path), dynamo=False)
    with pytest.raises(CeaError, match="no BERT word embeddings"):
        onnx_parameters(path)
    assert not (tmp_path / "st").exists()
