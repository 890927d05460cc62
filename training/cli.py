"""`python -m training <command>`: train (the worker torchrun starts), launch, plan, merge, tokenizer.

Exit codes and errors as every command line of the project's (training/exits.py)."""

from __future__ import annotations

import argparse
import sys

from training.exits import ERROR, OK, UsageError, run_command

COMMANDS = ("launch", "merge", "pack-env", "plan", "prepare-data", "report", "tokenizer", "train")
USAGE = f"usage: python -m training {{{','.join(COMMANDS)}}} ... (each command's --help says what it takes)"


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    return run_command(_dispatch, argv, tracebacks=argv[:1] == ["train"])  # a rank's crash: its traceback


def _dispatch(argv: list[str]) -> int:
    if not argv:  # run bare: what it takes, as a group run bare says it
        print(USAGE, file=sys.stderr)
        return ERROR
    if argv[0] in ("-h", "--help"):
        print(USAGE)
        return OK
    if argv[0] not in COMMANDS:
        raise UsageError(f"no such command {argv[0]!r} (see `python -m training --help`)")
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
