"""`python -m training <command>`: train (the worker torchrun starts), launch, plan, merge, tokenizer."""

from __future__ import annotations

import argparse
import sys


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    commands = {"train", "launch", "plan", "merge", "tokenizer", "prepare-data", "report", "pack-env"}
    if not argv or argv[0] not in commands:
        print(f"usage: python -m training {{{','.join(sorted(commands))}}} ...", file=sys.stderr)
        return 2
    cmd, rest = argv[0], argv[1:]
    if cmd == "train":
        from training.train import main as train_main

        return train_main(rest)
    if cmd == "plan":
        from training.plan_cli import main as plan_main

        return plan_main(rest)
    if cmd == "launch":
        from training.launch_cli import main as launch_main

        return launch_main(rest)
    if cmd == "prepare-data":
        from training.prepared import main as prepare_main

        return prepare_main(rest)
    if cmd == "report":
        from training.report import main as report_main

        return report_main(rest)
    if cmd == "pack-env":
        from training.pack_env import main as pack_main

        return pack_main(rest)
    if cmd == "merge":
        from training.merge import main as merge_main

        return merge_main(rest)
    p = argparse.ArgumentParser(prog="python -m training tokenizer")
    p.add_argument("--data", type=str, nargs="+", required=True)
    p.add_argument("--vocab-size", type=int, default=32000)
    p.add_argument("--out", required=True)
    a = p.parse_args(rest)
    from pathlib import Path

    from training.data import discover_files
    from training.tokenizer import train_tokenizer

    tok = train_tokenizer(discover_files([Path(d) for d in a.data]), a.vocab_size, Path(a.out))
    print(f"wrote {a.out} (vocabulary {tok.get_vocab_size()})")
    return 0
