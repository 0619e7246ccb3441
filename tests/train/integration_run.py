"""One transformers Trainer (or TRL SFTTrainer) run of a tiny causal LM with gengen's callback; tests and benches.

Run as a script (one process, ``torchrun`` on gloo, or to be killed mid-run) or call :func:`train` in-process::

    python tests/train/integration_run.py --study STUDY --model FOLDER --out DIR [--lora] [--kill-at N] [--resume]
    python tests/train/integration_run.py --study STUDY --model FOLDER --out DIR --loop   # evaluate() in a loop

``--kill-at N`` ends the process with ``os._exit`` right after step N's update (after the callback scored it, if it
was due, before the Trainer saves anything of that step): a hard kill, no clean-up.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import Any

PROMPT = "{premise} Question: {hypothesis} Yes or No?"


def training_texts(train_file: str, n: int = 64) -> list[str]:
    """The first ``n`` training examples as prompt + gold answer (causal LM text)."""
    import pandas as pd

    frame = pd.read_json(train_file, lines=True).head(n)
    return [
        PROMPT.format(premise=p, hypothesis=h) + (" Yes" if label == 1 else " No")
        for p, h, label in zip(frame["premise"], frame["hypothesis"], frame["label"], strict=True)
    ]


def _kill_at(step: int) -> Any:
    """A callback ending the process at once after update ``step`` (a hard kill, as a cluster's preemption)."""
    from transformers import TrainerCallback

    class Kill(TrainerCallback):  # type: ignore[misc]
        def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            if state.global_step == step:
                sys.stdout.flush()
                os._exit(9)

    return Kill()


def train(
    study: str,
    model_folder: str,
    out: Path,
    *,
    lora: bool = False,
    sft: bool = False,
    kill_at: int | None = None,
    resume: bool = False,
    max_steps: int = 6,
    save_steps: int = 3,
    grad_accum: int = 2,
    every: int = 3,
    batch: int = 4,
    store: str | None = None,
    device: str = "cpu",
    bf16: bool = False,
) -> Any:
    """Train ``max_steps`` updates with the callback scoring every ``every`` steps; returns the callback."""
    import datasets
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer, DataCollatorForLanguageModeling, TrainingArguments

    from gengen.integrations import GengenCallback, Schedule
    from gengen.study.config import load_config

    torch.set_num_threads(1)
    config = load_config(study)
    tokenizer = AutoTokenizer.from_pretrained(model_folder)
    model = AutoModelForCausalLM.from_pretrained(model_folder).to(device)
    if lora:
        import peft

        model = peft.get_peft_model(
            model, peft.LoraConfig(r=4, lora_alpha=8, lora_dropout=0.0, target_modules=["q_proj", "v_proj"])
        )
    texts = training_texts(str(config.task.train.path))
    callback = GengenCallback(study=study, schedule=Schedule(every=every), model_name="tiny", shots=None, store=store)
    callbacks: list[Any] = [callback]
    if kill_at is not None:
        callbacks.append(_kill_at(kill_at))
    common = dict(
        output_dir=str(out),
        max_steps=max_steps,
        per_device_train_batch_size=batch,
        gradient_accumulation_steps=grad_accum,
        learning_rate=5e-3,
        save_strategy="steps",
        save_steps=save_steps,
        logging_strategy="no",
        report_to=[],
        use_cpu=device == "cpu",
        bf16=bf16,
        seed=1,
        data_seed=1,
        dataloader_num_workers=0,
        disable_tqdm=True,
    )
    if int(os.environ.get("WORLD_SIZE", "1")) > 1:
        common["ddp_backend"] = "gloo"
    if sft:
        from trl import SFTConfig, SFTTrainer

        trainer: Any = SFTTrainer(
            model=model,
            # SFTConfig defaults to bf16: `common` says it (fp32 unless asked: the study gengen score checks with).
            args=SFTConfig(**common, dataset_text_field="text", max_length=64, packing=False),
            train_dataset=datasets.Dataset.from_dict({"text": texts}),
            processing_class=tokenizer,
            callbacks=callbacks,
        )
    else:
        from transformers import Trainer

        encoded = tokenizer(texts, truncation=True, max_length=64)
        dataset = datasets.Dataset.from_dict({"input_ids": encoded["input_ids"]})
        trainer = Trainer(
            model=model,
            args=TrainingArguments(**common),
            train_dataset=dataset,
            data_collator=DataCollatorForLanguageModeling(tokenizer, mlm=False),
            processing_class=tokenizer,
            callbacks=callbacks,
        )
    began = time.perf_counter()
    trainer.train(resume_from_checkpoint=True if resume else None)
    callback.seconds = time.perf_counter() - began
    return callback


def plain_loop(study: str, model_folder: str, out: Path, *, steps: int = 4, every: int = 2) -> int:
    """A plain PyTorch loop (DistributedDataParallel under torchrun) calling gengen.integrations.evaluate at
    every step; the weights saved at the scheduled steps by process 0. Returns the rows this process wrote."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from gengen.integrations import Schedule, evaluate
    from gengen.study.config import load_config

    torch.set_num_threads(1)
    size = int(os.environ.get("WORLD_SIZE", "1"))
    if size > 1:
        torch.distributed.init_process_group("gloo")
    rank = torch.distributed.get_rank() if size > 1 else 0
    tokenizer = AutoTokenizer.from_pretrained(model_folder)
    torch.manual_seed(1)
    model = AutoModelForCausalLM.from_pretrained(model_folder)
    trained = torch.nn.parallel.DistributedDataParallel(model) if size > 1 else model
    optimizer = torch.optim.AdamW(model.parameters(), lr=5e-3)
    texts = training_texts(str(load_config(study).task.train.path), n=8 * steps)
    options = {"study": study, "schedule": Schedule(every=every), "seed": 1, "model_name": "loop"}
    written = 0
    for step in range(steps + 1):
        written += evaluate(trained, tokenizer, step, total_steps=steps, **options)
        if step == steps:
            break
        mine = texts[8 * step : 8 * step + 8][rank::size]  # this process's share of the step's batch
        batch = tokenizer(mine, return_tensors="pt", padding=True)
        labels = batch["input_ids"].masked_fill(batch["attention_mask"] == 0, -100)
        trained(**batch, labels=labels).loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        if rank == 0 and (step + 1) % every == 0:
            model.save_pretrained(out / f"checkpoint-{step + 1}")
            tokenizer.save_pretrained(out / f"checkpoint-{step + 1}")
    if size > 1:
        torch.distributed.destroy_process_group()
    return written


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--study", required=True)
    parser.add_argument("--model", required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--store", default=None)
    parser.add_argument("--lora", action="store_true")
    parser.add_argument("--sft", action="store_true")
    parser.add_argument("--kill-at", type=int, default=None)
    parser.add_argument("--resume", action="store_true")
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    parser.add_argument("--bf16", action="store_true", help="mixed precision (the callback scores under it too)")
    parser.add_argument("--loop", action="store_true", help="a plain PyTorch loop calling evaluate(), no Trainer")
    args = parser.parse_args(argv)
    if args.loop:
        print(f"done {plain_loop(args.study, args.model, args.out)} rows written", flush=True)
        return
    callback = train(
        args.study, args.model, args.out, lora=args.lora, sft=args.sft, kill_at=args.kill_at, resume=args.resume,
        batch=args.batch, store=args.store, device=args.device, bf16=args.bf16,
    )  # fmt: skip
    print(f"done {callback.evaluator.hook.overhead()}", flush=True)


if __name__ == "__main__":
    main()
