"""The ``dspark-convert`` command line: parse arguments, call the library, render the result (Rich or JSON).

Every command maps :class:`~dspark_convert.errors.ConvertError` to one line on stderr and exit code 2.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer
from rich.console import Console
from rich.markup import escape

from .errors import ConvertError

app = typer.Typer(no_args_is_help=True, add_completion=True, pretty_exceptions_enable=False,
                  help="Convert DSpark / DFlash / EAGLE-3 drafts to GGUF, inspect and verify GGUF files.")
err_console = Console(stderr=True, highlight=False)
T = TypeVar("T")


def run_or_exit(fn: Callable[[], T]) -> T:
    """Run ``fn``; a ConvertError becomes one line on stderr and exit code 2."""
    try:
        return fn()
    except ConvertError as e:
        # escape(): messages quote names read from (possibly hostile) files, which must not be parsed as markup
        err_console.print(f"[bold red]error:[/] {escape(str(e))}", markup=True, soft_wrap=True)
        raise typer.Exit(2) from None


def print_json(data: Any) -> None:
    """One strict JSON document on stdout (NaN/Inf as strings, see render.dumps_json)."""
    from .render import dumps_json

    sys.stdout.write(dumps_json(data) + "\n")


@contextmanager
def byte_progress(enabled: bool, description: str) -> Iterator[Callable[[int, int], None] | None]:
    """A Rich progress bar (bytes, throughput, ETA) on a terminal; nothing otherwise."""
    if not enabled or not sys.stderr.isatty():
        yield None
        return
    from rich.progress import BarColumn, DownloadColumn, Progress, TimeRemainingColumn, TransferSpeedColumn

    with Progress("[progress.description]{task.description}", BarColumn(), DownloadColumn(), TransferSpeedColumn(),
                  TimeRemainingColumn(), console=err_console, transient=True) as bar:
        task = bar.add_task(description, total=None)

        def update(done: int, total: int) -> None:
            bar.update(task, completed=done, total=total)

        yield update


@app.command()
def hf2gguf(
    draft: Annotated[str, typer.Argument(help="Draft checkpoint: a local folder or a Hub repo id (org/name[@rev]).")],
    target_model_dir: Annotated[str | None, typer.Option("--target-model-dir", "-t", help="Target model: folder or Hub repo id (tokenizer, config). Optional for a DeepSeek-V4 checkpoint (its own tokenizer).")] = None,
    outfile: Annotated[str | None, typer.Option("--outfile", "-o", help="Output path; {ftype} and {outtype} are expanded. Default: GGUF naming convention.")] = None,
    outtype: Annotated[str, typer.Option(help="f32, f16, bf16, q8_0 or auto (from the checkpoint's dtypes).")] = "auto",
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Print the plan (keys, tensors, types, sizes) and write nothing.")] = False,
    force: Annotated[bool, typer.Option("--force", help="Overwrite an existing output file.")] = False,
    with_target_embeddings: Annotated[bool, typer.Option("--with-target-embeddings", help="Self-contained draft: copy the target's token_embd (and output) into the GGUF.")] = False,
    allow_nonfinite: Annotated[bool, typer.Option("--allow-nonfinite", help="Convert tensors holding NaN/Inf instead of refusing.")] = False,
    metadata: Annotated[Path | None, typer.Option("--metadata", help="JSON file overriding general.* metadata.")] = None,
    model_name: Annotated[str | None, typer.Option("--model-name", help="Override general.name.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable summary on stdout.")] = False,
    dspark: Annotated[bool, typer.Option("--dspark", help="Upstream's flag for the DSpark draft inside a DeepSeek-V4 checkpoint (recognised without it).")] = False,
) -> None:
    """Convert a DSpark / DFlash / EAGLE-3 draft checkpoint (or the DSpark draft inside a DeepSeek-V4 checkpoint)
    to a GGUF file llama.cpp loads."""
    from .conversion import convert
    from .report import render_conversion

    with byte_progress(not as_json and not dry_run, "converting") as progress:
        result = run_or_exit(lambda: convert(draft, target_model_dir, outfile, outtype=outtype, force=force, dry_run=dry_run,
                                             embed_from_target=with_target_embeddings, allow_nonfinite=allow_nonfinite,
                                             metadata=metadata, model_name=model_name, dspark=dspark,
                                             progress=progress))
    if as_json:
        from .report import conversion_to_dict

        print_json(conversion_to_dict(result))
    else:
        render_conversion(result, Console(highlight=False))


@app.command()
def check(
    file: Annotated[Path, typer.Argument(help="A GGUF draft file, made by any tool.")],
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable findings on stdout.")] = False,
) -> None:
    """Check a GGUF draft against llama.cpp's loader rules (exit 1 on any error)."""
    from .check import check_plan, errors
    from .gguffile.reader import plan_from_gguf

    plan = run_or_exit(lambda: plan_from_gguf(file))
    findings = check_plan(plan)
    ok = not errors(findings)
    if as_json:
        print_json({"file": str(file), "arch": plan.arch, "ok": ok, "findings": [f.to_dict() for f in findings]})
    else:
        from .report import render_findings

        render_findings(file, plan.arch, findings, Console(highlight=False))
    raise typer.Exit(0 if ok else 1)


@app.command()
def inspect(
    file: Annotated[Path, typer.Argument(help="A GGUF file (only its header is read, unless --stats).")],
    as_json: Annotated[bool, typer.Option("--json", help="JSON on stdout (schema: docs/inspect.md).")] = False,
    full_arrays: Annotated[bool, typer.Option("--full-arrays", help="Show whole arrays instead of their first items.")] = False,
    filter: Annotated[str | None, typer.Option("--filter", help="Glob on KV and tensor names, e.g. 'blk.0.*'.")] = None,
    stats: Annotated[bool, typer.Option("--stats", help="Per-tensor min/max/mean/std/NaN/Inf (reads the data).")] = False,
    no_tensors: Annotated[bool, typer.Option("--no-tensors", help="Leave out the tensor list.")] = False,
) -> None:
    """Show a GGUF file's metadata, tensors, tokenizer and totals."""
    from .inspect import inspect_gguf
    from .render import dumps_json, render_inspect

    info = run_or_exit(lambda: inspect_gguf(file, full_arrays=full_arrays, tensors=not no_tensors, filter=filter,
                                            stats=stats))
    if as_json:
        sys.stdout.write(dumps_json(info) + "\n")
    else:
        render_inspect(info, Console(highlight=False))


@app.command()
def diff(
    a: Annotated[Path, typer.Argument(help="First GGUF file (the reference for NMSE).")],
    b: Annotated[Path, typer.Argument(help="Second GGUF file.")],
    as_json: Annotated[bool, typer.Option("--json", help="JSON on stdout (schema: docs/inspect.md).")] = False,
    ignore: Annotated[list[str] | None, typer.Option("--ignore", help="Glob of KV/tensor names to skip (repeatable).")] = None,
    no_stats: Annotated[bool, typer.Option("--no-stats", help="Compare bytes only, no max-abs-diff/NMSE.")] = False,
    ignore_order: Annotated[bool, typer.Option("--ignore-order", help="KV and tensor order do not count.")] = False,
) -> None:
    """Compare two GGUF files: exit 0 when equal, 1 when different, 2 on error."""
    from .diff import diff_gguf
    from .render import dumps_json, render_diff

    result = run_or_exit(lambda: diff_gguf(a, b, ignore=ignore or [], tensor_stats=not no_stats,
                                           ignore_order=ignore_order))
    if as_json:
        sys.stdout.write(dumps_json(result) + "\n")
    else:
        render_diff(result, Console(highlight=False))
    raise typer.Exit(0 if result["equal"] else 1)


@app.command("verify")
def verify_cmd(
    gguf_file: Annotated[Path, typer.Argument(help="The converted GGUF draft.")],
    hf: Annotated[Path, typer.Option("--hf", help="The original Hugging Face draft folder (config.json + safetensors).")],
    target_model_dir: Annotated[Path | None, typer.Option("--target-model-dir", "-t", help="Target folder (embeddings, lm_head, config); not needed for a DeepSeek-V4 DSpark file.")] = None,
    context: Annotated[int, typer.Option(help="Context positions of random target features.")] = 16,
    seed: Annotated[int, typer.Option(help="Seed of the random features and tokens.")] = 0,
    steps: Annotated[int, typer.Option(help="EAGLE-3: chained draft steps.")] = 3,
    as_json: Annotated[bool, typer.Option("--json", help="JSON report on stdout (schema: docs/verify.md).")] = False,
) -> None:
    """Run the GGUF (numpy) and the HF (torch) forwards on seeded inputs: exit 0 pass, 1 fail, 2 error."""
    from .verify import render_report, verify

    report = run_or_exit(lambda: verify(gguf_file, hf, target_model_dir, context=context, seed=seed, steps=steps))
    if as_json:
        print_json(report.to_dict())
    else:
        render_report(report, Console(highlight=False))
    raise typer.Exit(0 if report.passed else 1)


class _OneLineWarnings(logging.Handler):
    """Library warnings (fallbacks, recognised-by-regex tokenizers, ...) as one 'warning:' line each on stderr."""

    def emit(self, record: logging.LogRecord) -> None:
        err_console.print(f"[yellow]warning:[/] {record.getMessage()}", markup=True, soft_wrap=True, highlight=False)


def main() -> None:
    """Console-script entry point."""
    root = logging.getLogger("dspark_convert")
    if not root.handlers:
        root.addHandler(_OneLineWarnings(logging.WARNING))
        root.propagate = False
    logging.getLogger("gguf").setLevel(logging.ERROR)  # gguf-py's own info/debug chatter is not for users
    app()


if __name__ == "__main__":  # python -m dspark_convert.cli
    main()
