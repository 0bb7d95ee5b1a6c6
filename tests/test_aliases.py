"""Model names users type (torchvision, timm, Keras, Hugging Face ids) resolve onto zoo names;
an unknown one gets one line with the nearest names."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from ddlsim.errors import ConfigError, UnknownNameError
from ddlsim.workload.transformers import TRANSFORMER_NAMES
from ddlsim.workload.zoo import MODEL_NAMES, get_model
from ddlsim.workload.zoo.aliases import aliases_of, canonical, is_transformer, nearest

REPO = Path(__file__).resolve().parents[1]

TYPED = {
    # torchvision
    "resnet50": "resnet50",
    "efficientnet_v2_s": "efficientnetv2-s",
    "efficientnet_v2-s": "efficientnetv2-s",
    "inception_v3": "inception3",
    "vgg16": "vgg16",
    "alexnet": "alexnet",
    "googlenet": "googlenet",
    "vit_b_16": "vit-b-16",
    # timm
    "efficientnet_b0": "efficientnet-b0",
    "inception_v4": "inception4",
    "resnext101_32x4d": "resnext101-32x4d",
    "seresnext101_32x4d": "se-resnext101-32x4d",
    "resnetv2_50": "resnet50_v2",
    "vit_base_patch16_224": "vit-b-16",
    "vit_large_patch16_224": "vit-l-16",
    "vit_huge_patch14_224": "vit-h-14",
    # Keras applications
    "ResNet50V2": "resnet50_v2",
    "InceptionV3": "inception3",
    "EfficientNetB4": "efficientnet-b4",
    "MobileNet": "mobilenet",
    # Hugging Face
    "bert-large-uncased": "bert-large",
    "google-bert/bert-base-uncased": "bert-base",
    "bert-base-cased": "bert-base-cased",
    "gpt2-xl": "gpt2-xl",
    "openai-community/gpt2": "gpt2",
    "mosaicml/mpt-7b": "mpt-7b-released",
    "meta-llama/Llama-2-7b-hf": "llama2-7b",
    "meta-llama/Llama-2-70b-hf": "llama2-70b",
    "meta-llama/Meta-Llama-3-8B": "llama3-8b",
    "meta-llama/Meta-Llama-3-70B": "llama3-70b",
    "google/vit-base-patch16-224": "vit-b-16",
    "facebook/wav2vec2-base": "wav2vec2-base",
    "distilbert-base-uncased": "distilbert-base",
    "google/electra-base-discriminator": "electra-base",
    "facebook/bart-large": "bart-large",
    "microsoft/deberta-v2-xxlarge": "deberta-v2-xxlarge",
    "transfo-xl-wt103": "transformer-xl-large",
    "transfo-xl/transfo-xl-wt103": "transformer-xl-large",
    # case and separators
    "BERT_LARGE": "bert-large",
    "Resnet50_V1.5": "resnet50_v1.5",
    "MPT 7B": "mpt-7b",
}


@pytest.mark.parametrize(("typed", "zoo"), TYPED.items())
def test_typed_names_resolve(typed, zoo):
    assert canonical(typed) == zoo


def test_every_zoo_name_is_its_own_canonical_name():
    for name in (*MODEL_NAMES, *TRANSFORMER_NAMES):
        assert canonical(name) == name
        assert canonical(name.upper()) == name


def test_registries_stay_apart():
    assert not set(MODEL_NAMES) & set(TRANSFORMER_NAMES)
    with pytest.raises(UnknownNameError):
        get_model("gpt2")  # predict cannot simulate a transformer yet
    assert is_transformer("bert-large-uncased") and not is_transformer("ResNet50")


def test_every_measured_transformer_row_resolves():
    with open(REPO / "traces" / "measured" / "runs_transformers.csv", encoding="utf-8") as f:
        models = {row["model"] for row in csv.DictReader(f)}
    assert len(models) == 15
    for model in models:
        assert canonical(model) in TRANSFORMER_NAMES, model


def test_unknown_name_lists_the_nearest_on_one_line():
    with pytest.raises(UnknownNameError) as err:
        canonical("bert-hueg")
    message = str(err.value)
    assert message.startswith("unknown model 'bert-hueg'; nearest: ")
    assert "\n" not in message and "bert-base" in message and "resnet50" not in message
    with pytest.raises(UnknownNameError, match=r"zzzzzz.; no zoo model is close"):
        canonical("zzzzzz")
    assert nearest("resnet5O")[0] == "resnet50"


def test_non_string_refused():
    with pytest.raises(ConfigError, match="must be a string, got 3"):
        canonical(3)  # type: ignore[arg-type]


def test_aliases_of():
    assert "transfo-xl-wt103" in aliases_of("transformer-xl-large")
    assert aliases_of("resnet152") == ()
