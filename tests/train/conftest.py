"""Fixtures for the fine-tuning and scoring tests: a tokenizer, tiny OPT, OLMo2 and SmolLM3 models, data; all local."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

torch.set_num_threads(1)

PROMPT = "{premise} Question: {hypothesis} Yes or No?"


@pytest.fixture(scope="session")
def assets(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Demo data (small), a trained tokenizer and one tiny model per family (OPT, OLMo2, SmolLM3), in one folder."""
    from gengen.demo.tasks import tokenizer_corpus, write_demo_data
    from gengen.demo.tiny import build_tiny_model, train_tokenizer

    root = tmp_path_factory.mktemp("assets")
    data = write_demo_data(root / "data", n_train=400, n_test=40, seed=3)
    tokenizer = train_tokenizer(tokenizer_corpus(PROMPT, (" Yes", " No")), root / "tokenizer")
    models = {}
    for index, family in enumerate(("opt", "olmo2", "smollm3")):
        model = build_tiny_model(
            family,
            vocab_size=len(tokenizer),
            hidden=16,
            layers=1,
            heads=2,
            pad_token_id=tokenizer.pad_token_id,
            bos_token_id=tokenizer.bos_token_id,
            eos_token_id=tokenizer.eos_token_id,
            seed=index,
        )
        folder = root / "models" / family
        model.save_pretrained(folder)
        tokenizer.save_pretrained(folder)
        models[family] = folder
    return {"root": root, "data": data, "tokenizer": tokenizer, "models": models}


def _study_toml(
    assets: dict[str, Any],
    output: Path,
    *,
    families: tuple[str, ...] = ("opt", "olmo2"),
    max_steps: int = 12,
    every: int = 6,
    seeds: tuple[int, ...] = (1,),
    extra: str = "",
) -> str:
    """A small study over the tiny models: ID + two OOD test sets."""
    models = "\n".join(
        f'[[models]]\nname = "{family}-tiny"\npath = "{assets["models"][family]}"\nfamily = "{family}"\nsize = "tiny"\n'
        for family in families
    )
    data = assets["data"]
    return f"""
[study]
name = "t"
output = "{output}"
id_testset = "id"

{models}
[task]
prompt = "{PROMPT}"
train = {{ path = "{data["train"]}" }}

[[testsets]]
name = "id"
path = "{data["id"]}"

[[testsets]]
name = "negation"
path = "{data["negation"]}"

[[testsets]]
name = "unseen_vocab"
path = "{data["unseen_vocab"]}"

[training]
learning_rate = 5e-3
max_steps = {max_steps}
batch_size = 8
warmup_steps = 2
max_length = 64
precision = "fp32"
device = "cpu"
seeds = {list(seeds)}
{extra}

[evaluation]
every = {every}
batch_size = 16
"""


@pytest.fixture(scope="session")
def study_toml() -> Any:
    """``study_toml(assets, output, **options) -> str``: the TOML of a small study over the tiny models."""
    return _study_toml
