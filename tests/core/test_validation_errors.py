"""pydantic's ValidationError read as fields (core.train.validation_errors) and the config edit it asks for
(core.train.diagnosis_validation). Shapes from published threads: axolotl's list_type (axolotl PR 1840),
missing and extra_forbidden (luxonis-ml PR 480), v1's `(type=value_error.missing)`, vLLM's model-level
`Value error, ...` (vllm-project/vllm#26161); the held-apart cases are tests/fixtures/logs/pydantic."""

from core.train.failures import diagnose_text
from core.train.validation_errors import read_field_errors

AXOLOTL = """$ accelerate launch -m axolotl.cli.train examples/tiny-llama/pretrain.yml
Traceback (most recent call last):
  File "/root/axolotl/src/axolotl/utils/config/__init__.py", line 213, in validate_config
    AxolotlConfigWCapabilities(
  File "/root/env/lib/python3.11/site-packages/pydantic/main.py", line 171, in __init__
    self.__pydantic_validator__.validate_python(data, self_instance=self)
pydantic_core._pydantic_core.ValidationError: 1 validation error for AxolotlConfigWCapabilities
pretraining_dataset
  Input should be a valid list [type=list_type, input_value={'path': 'c4', 'name': 'en', 'type': 'pretrain'}, input_type=dict]
    For further information visit https://errors.pydantic.dev/2.6/v/list_type
"""


def test_fields_messages_types_and_values_are_read():
    block = """model.inputs.0.preprocessing
  Field required [type=missing, input_value={'name': 'input', 'dtype'...0]}, input_type=dict]
    For further information visit https://errors.pydantic.dev/2.13/v/missing
model.inputs.0.preprocesing
  Extra inputs are not permitted [type=extra_forbidden, input_value={'mean': [0, 0, 0]}, input_type=dict]
    For further information visit https://errors.pydantic.dev/2.13/v/extra_forbidden
INFO next line""".splitlines()
    errors = read_field_errors("2 validation errors for Config", block)
    assert [(e.loc, e.kind, e.message) for e in errors] == [
        ("model.inputs.0.preprocessing", "missing", "Field required"),
        ("model.inputs.0.preprocesing", "extra_forbidden", "Extra inputs are not permitted")]
    assert errors[1].value_type == "dict" and errors[0].model == "Config"


def test_pydantic_1_and_a_model_level_value_error():
    v1 = read_field_errors("1 validation error for Settings", ["api_key", "  field required (type=value_error.missing)"])
    assert v1[0].loc == "api_key" and v1[0].kind == "value_error.missing" and not v1[0].own_message
    model = read_field_errors("1 validation error for ModelConfig", [
        "  Value error, Expecting value: line 1 column 1 (char 0) [type=value_error, input_value=ArgsKwargs((), "
        "{'model': ...}), input_type=ArgsKwargs]"])
    assert model[0].loc == "" and model[0].own_message and model[0].message == "Expecting value: line 1 column 1 (char 0)"


def test_the_root_holds_the_field_and_the_fix_follows_from_the_error_type():
    first = diagnose_text(AXOLOTL)[0]
    assert first.id == "config-field-rejected"
    assert "`pretraining_dataset`" in first.title and "YAML list" in first.fix
    texts = [e.text for e in first.evidence]
    assert any("Input should be a valid list (given dict" in t for t in texts)
    assert "the config the command read: examples/tiny-llama/pretrain.yml" in texts


def test_a_missing_field_and_an_unknown_one_get_their_own_fixes():
    log = AXOLOTL.replace("pretraining_dataset\n  Input should be a valid list [type=list_type, input_value={'path': "
                          "'c4', 'name': 'en', 'type': 'pretrain'}, input_type=dict]",
                          "base_model\n  Field required [type=missing, input_value={'datasets': []}, input_type=dict]")
    assert "Add `base_model` to the config" in diagnose_text(log)[0].fix
    log = log.replace("base_model\n  Field required [type=missing",
                      "lora_rnak\n  Extra inputs are not permitted [type=extra_forbidden")
    assert diagnose_text(log)[0].fix.startswith("Remove `lora_rnak` from the config")


def test_a_flag_is_named_as_the_command_line_wrote_it():
    log = ("$ vllm serve ./merged --max-model-len 4k\n"
           "Traceback (most recent call last):\n  File \"/venv/vllm/engine/arg_utils.py\", line 9, in create\n"
           "pydantic_core._pydantic_core.ValidationError: 1 validation error for ModelConfig\nmax_model_len\n"
           "  Input should be a valid integer, unable to parse string as an integer [type=int_parsing, "
           "input_value='4k', input_type=str]\n")
    first = diagnose_text(log)[0]
    assert first.id == "config-field-rejected" and "`--max-model-len`" in first.fix and "an integer" in first.fix


def test_a_validators_own_sentence_is_the_roots_message_not_a_field_error():
    log = ("(APIServer pid=7) Traceback (most recent call last):\n"
           "(APIServer pid=7)   File \"/venv/pydantic/_internal/_dataclasses.py\", line 127, in __init__\n"
           "(APIServer pid=7) pydantic_core._pydantic_core.ValidationError: 1 validation error for ModelConfig\n"
           "(APIServer pid=7)   Value error, rope_scaling should have a 'rope_type' key [type=value_error, "
           "input_value=ArgsKwargs((), {'model': ...}), input_type=ArgsKwargs]\n")
    first = diagnose_text(log)[0]
    assert first.id != "config-field-rejected"
    assert any("ModelConfig: rope_scaling should have a 'rope_type' key" in e.text for e in first.evidence)


def test_a_block_flattened_onto_one_line_and_a_blank_line_inside():
    flat = read_field_errors("ValidationError: 1 validation error for Config llm   Field required [type=missing, "
                             "input_value={'PATH': '/usr/bin'}, input_type=dict]     For further information visit "
                             "https://errors.pydantic.dev/2.7/v/missing", [])
    assert [(e.loc, e.kind) for e in flat] == [("llm", "missing")]
    gap = read_field_errors("1 validation error for TrainConfig", ["src_subword_model", "", "  Extra inputs are not "
                            "permitted [type=extra_forbidden, input_value='bpe.model', input_type=str]"])
    assert [(e.loc, e.kind, e.value) for e in gap] == [("src_subword_model", "extra_forbidden", "'bpe.model'")]
