"""A tiny Transformers `Trainer` run: a 1-layer GPT-2 built from a config (nothing downloaded), a made-up
dataset, `report_to` left at its default. No kubetrain import: progress reaches the operator only if
Transformers' own KubeflowCallback finds Kubeflow Trainer's env. Prints `hf-trainer: done` at the end.

`STEP_SECONDS` (default 0) makes each step last at least that long, so that a test watching the progress
mid-run sees it whatever the machine's speed."""

import os
import sys
import time

import torch
from transformers import GPT2Config, GPT2LMHeadModel, Trainer, TrainerCallback, TrainingArguments


class Tokens(torch.utils.data.Dataset):  # type: ignore[type-arg]
    def __init__(self, size: int) -> None:
        generator = torch.Generator().manual_seed(0)
        self.rows = torch.randint(0, 32, (size, 16), generator=generator)

    def __len__(self) -> int:
        return len(self.rows)

    def __getitem__(self, index: int) -> dict[str, torch.Tensor]:
        return {"input_ids": self.rows[index], "labels": self.rows[index]}


class AtLeast(TrainerCallback):
    """Sleeps after each step for what is left of `seconds` since the step began."""

    def __init__(self, seconds: float) -> None:
        self.seconds, self.began = seconds, time.monotonic()

    def on_step_begin(self, *args: object, **kwargs: object) -> None:
        self.began = time.monotonic()

    def on_step_end(self, *args: object, **kwargs: object) -> None:
        time.sleep(max(0.0, self.seconds - (time.monotonic() - self.began)))


def main() -> None:
    torch.manual_seed(0)
    config = GPT2Config(vocab_size=32, n_positions=16, n_embd=16, n_layer=1, n_head=2)
    args = TrainingArguments(
        output_dir=sys.argv[1] if len(sys.argv) > 1 else "out",
        max_steps=int(os.environ.get("STEPS", "12")),
        per_device_train_batch_size=4,
        logging_steps=int(os.environ.get("LOGGING_STEPS", "2")),
        save_strategy="no",
        use_cpu=True,
        disable_tqdm=True,
    )
    print(f"hf-trainer: report_to={args.report_to}", flush=True)
    floor = float(os.environ.get("STEP_SECONDS", "0"))
    callbacks = [AtLeast(floor)] if floor > 0 else []
    Trainer(model=GPT2LMHeadModel(config), args=args, train_dataset=Tokens(48), callbacks=callbacks).train()
    print("hf-trainer: done", flush=True)


if __name__ == "__main__":
    main()
