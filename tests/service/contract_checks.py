"""A schemathesis check of the rule ``POST /examples`` keeps that its document cannot say (schemathesis.toml loads
it): a 422 to a schema-valid request is allowed there only where the labels and the texts differ in number."""

import schemathesis


@schemathesis.check
def refused_only_for_unequal_lengths(ctx, response, case):
    """A schema-valid ``POST /examples`` answered 422 gave as many labels as texts (or suggestions): the service
    refused something its document allows."""
    if (case.method, case.path) != ("POST", "/examples") or response.status_code != 422 or case.meta is None:
        return None
    if not case.meta.generation.mode.is_positive or not isinstance(case.body, dict):
        return None
    given = case.body.get("texts", case.body.get("suggestions"))
    if isinstance(given, list) and len(given) == len(case.body.get("labels", [])):
        raise AssertionError(f"a schema-valid request with as many labels as texts was refused: {response.text}")
    return None
