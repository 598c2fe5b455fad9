"""benchd's command line: argparse subcommands, and the only place that exits.

Each subcommand lives in ``benchd/commands/<name>.py`` and exposes
``register(subparsers)``, which adds its parser and sets ``handler`` — a
function ``(args) -> int`` (sync or async). Errors are mapped to exit codes
here, and only here:

====  =====================================================================
code  meaning
====  =====================================================================
0     success
1     a ``--fail-under`` threshold was breached
2     bad input: flag, config, fixture, qrels/run file
3     the target is unreachable, refused the key, or broke its contract
4     internal error (a bug: please report it)
5     I/O error: writing an output, baseline or pid file failed (disk full, ...)
130   interrupted (Ctrl-C)
====  =====================================================================
"""

from __future__ import annotations

import argparse
import difflib
import importlib
import os
import re
import sys
from collections.abc import Sequence
from typing import Any

from benchd import __version__, redact
from benchd.errors import EXIT_INPUT, EXIT_INTERNAL, BenchdError, OutputError

__all__ = ["COMMANDS", "build_parser", "main"]

# One table, in help order: each name is a module under benchd.commands, each line the
# help its parser registers (a test holds them equal). `benchd --help` and
# `benchd --version` list commands from here without importing a command module:
# those import numpy, httpx, anyio, the targets and the reference store.
COMMANDS: dict[str, str] = {
    "run": "run the daemon: probes on their schedules, metrics on /metrics",
    "once": "run one cycle of each probe and print the scores",
    "init": "write an annotated starter config",
    "validate": "check fixture files and report every problem",
    "score": "score a TREC run against qrels, trec_eval-compatible",
    "qrels": "write a fixture's judgments as TREC qrels (graded where the fixture grades)",
    "convert": "convert a public benchmark (BEIR, LongMemEval, TREC, Cranfield) to a fixture",
    "synth": "write a deterministic synthetic corpus with near-miss distractors",
    "refstore": "serve the reference store (a Zengram-compatible memory API)",
    "baseline": "pin a probe's per-query quality to a TOML file, or show one",
    "purge": "delete everything benchd owns in a namespace (sentinel last)",
    "compare": "compare two runs, or several probes of one run, with paired significance",
}


class _Parser(argparse.ArgumentParser):
    """argparse that reports a bad flag in one line with exit code 2, with a likely fix."""

    def error(self, message: str) -> Any:
        message = _suggest_choice(message)
        self.exit(EXIT_INPUT, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


# --------------------------------------------------------------------------- did you mean

_CHOICE = re.compile(r"invalid choice: '(?P<word>[^']*)' \(choose from (?P<choices>.*)\)$")


def _did_you_mean(word: str, known: Sequence[str]) -> str:
    """``; did you mean 'X'?`` for the closest of ``known``, or nothing when none is close."""
    close = difflib.get_close_matches(word, list(known), n=1, cutoff=0.6)
    return f"; did you mean {close[0]!r}?" if close else ""


def _suggest_choice(message: str) -> str:
    """argparse's "invalid choice" (a command, an action, a --format value) with its likely fix."""
    match = _CHOICE.search(message)
    if match is None:
        return message
    choices = re.findall(r"'([^']*)'", match["choices"])
    return message + _did_you_mean(match["word"], choices)


def _chosen_parser(parser: argparse.ArgumentParser, args: argparse.Namespace) -> Any:
    """The innermost (sub)parser the words chose: ``benchd baseline save``'s, not ``benchd``'s."""
    current = parser
    while True:
        subs = [a for a in current._actions if isinstance(a, argparse._SubParsersAction)]
        name = getattr(args, subs[0].dest, None) if subs and subs[0].dest else None
        if not isinstance(name, str) or name not in subs[0].choices:
            return current
        current = subs[0].choices[name]


def _reject_unknown(parser: argparse.ArgumentParser, args: argparse.Namespace,
                    extra: Sequence[str]) -> None:  # fmt: skip
    """Fail on words no parser took, from the command that would take them, with its flags."""
    chosen = _chosen_parser(parser, args)
    flags = [o for a in chosen._actions for o in a.option_strings if o.startswith("--")]
    unknown = next((w.split("=", 1)[0] for w in extra if w.startswith("--")), None)
    hint = _did_you_mean(unknown, flags) if unknown else ""
    chosen.error(f"unrecognized arguments: {' '.join(extra)}{hint}")


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The parser with command ``only`` in full; the others named with their help only.

    Only ``only``'s module is imported, so ``benchd --version``, ``benchd --help`` and
    an unknown word import none.
    """
    parser = _Parser(
        prog="benchd",
        description=(
            "Continuously seed a labeled corpus into a retrieval store, query it, "
            "score the rankings and latency, and export Prometheus metrics."
        ),
        epilog=(
            "Start with 'benchd run' (no config: the embedded reference store and packaged "
            "fixture, /metrics on 127.0.0.1:9108) or 'benchd init' for a starter config. "
            "'benchd COMMAND --help' documents each command. Exit codes: 0 ok, 1 threshold "
            "breached, 2 bad input (flag, config, fixture, file), 3 target unreachable, "
            "refused or failed, 4 internal error, 5 I/O error (disk full, ...), 130 interrupted."
        ),
    )
    parser.add_argument("--version", action="version", version=f"benchd {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for name, summary in COMMANDS.items():
        if name == only:
            importlib.import_module(f"benchd.commands.{name}").register(sub)
        else:
            sub.add_parser(name, help=summary, add_help=False)
    return parser


def _invoke(args: argparse.Namespace) -> int:
    import inspect

    handler = args.handler
    if inspect.iscoroutinefunction(handler):
        import anyio  # only a command that runs async code pays for the event loop

        result: int = anyio.run(handler, args)
        return result
    result = handler(args)
    return int(result)


def _skip_httpx_cli() -> None:
    """Keep ``import httpx`` from importing httpx's own command line.

    httpx imports it (click, pygments and rich) whenever those are installed, and
    treats an ImportError as "not installed"; benchd never runs it. A ``None`` in
    ``sys.modules`` is Python's documented way to make one import fail.
    """
    if "httpx" not in sys.modules:
        sys.modules.setdefault("httpx._main", None)  # type: ignore[arg-type]


def main(argv: Sequence[str] | None = None) -> int:
    words = list(sys.argv[1:] if argv is None else argv)
    _skip_httpx_cli()
    # Import only the named subcommand's module: `benchd score` need not load a web stack.
    parser = build_parser(words[0] if words else None)

    args, extra = parser.parse_known_args(words)
    if extra:
        _reject_unknown(parser, args, extra)
    if getattr(args, "handler", None) is None:
        parser.print_help()
        return EXIT_INPUT
    from benchd.logging import configure_logging  # structlog: only once a command runs

    # Logs go to stderr (stdout is for output that pipes); commands may raise the level.
    configure_logging("warning")
    try:
        code = _invoke(args)
        sys.stdout.flush()  # a full disk behind stdout fails here, inside the boundary
        return code
    except BenchdError as exc:
        print(f"benchd: error: {redact.mask(str(exc))}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("benchd: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        _silence_stdout()
        return 0
    except OSError as exc:  # ENOSPC, EROFS, EIO...: what was being written, and why
        _silence_stdout()
        error = OutputError.from_os_error(exc)
        print(f"benchd: error: {redact.mask(str(error))}", file=sys.stderr)
        return error.exit_code
    except Exception as exc:  # last-resort boundary: one line, no traceback
        print(
            f"benchd: internal error: {type(exc).__name__}: {redact.mask(str(exc))} "
            "(this is a bug; rerun with BENCHD_DEBUG=1 for a traceback)",
            file=sys.stderr,
        )
        if os.environ.get("BENCHD_DEBUG"):
            raise
        return EXIT_INTERNAL


def _silence_stdout() -> None:
    """Point stdout at /dev/null so the interpreter's own flush at exit cannot fail again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):  # stdout closed or not a real file
        pass
