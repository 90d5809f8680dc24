"""The ``dspark-convert`` command line: parse arguments, call the library, render the result (Rich or JSON).

Every command maps :class:`~dspark_convert.errors.ConvertError` to one line on stderr and exit code 2, and an
interrupt (SIGINT, SIGTERM; see :mod:`dspark_convert.entry`) to one line and exit code 130 / 143. All human
output goes through :mod:`dspark_convert.render` (imported when needed, so ``--help`` stays fast).
"""

from __future__ import annotations

import enum
import importlib.util
import logging
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

import click
import typer
from typer.core import TyperCommand, TyperGroup

from . import __version__
from .errors import ConvertError, Interrupted
from .interrupts import install_signal_handlers, interrupted_line, settle_signals
from .streams import STDOUT, OutputError


def variant_words() -> ModuleType:
    """:mod:`dspark_convert.registry.words` (what the help says about the variants) without the registry, whose
    import loads the schema and gguf's constants: the one file, loaded under a private name (under its own, a later
    ``import dspark_convert.registry.words`` would skip the registry package, which is not imported yet)."""
    if "dspark_convert.registry.words" in sys.modules:  # the registry is loaded already: its module
        return sys.modules["dspark_convert.registry.words"]
    name = "_dspark_convert_variant_words"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, Path(__file__).parent / "registry" / "words.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[name]
        raise
    return module


if TYPE_CHECKING:
    from .registry import words as W
else:
    W = variant_words()
#: upstream's converter flags that select a converter class; one Typer parameter of ``hf2gguf`` carries each (a
#: third flag in the words would need a third parameter: this unpacking fails until it has one)
(UPSTREAM_FLAG, UPSTREAM_FLAG_2) = W.UPSTREAM_FLAGS
#: the product summary: the draft kinds the variants convert
SUMMARY = f"Convert {' / '.join(W.DRAFT_KINDS)} drafts to GGUF, inspect and verify GGUF files."
HF2GGUF_HELP = (f"Convert a {' / '.join(W.DRAFT_KINDS)} draft checkpoint to a GGUF file llama.cpp loads (no "
                f"--target-model-dir needed for {', '.join(W.DRAFTS_INSIDE_TARGETS)}).")


def _rendered(show: Callable[[], None]) -> str:
    """What ``show()`` prints on Typer's help console, captured at the width the real console measures."""
    import io

    from typer import rich_utils

    real = rich_utils._get_rich_console
    buffer = io.StringIO()
    width = real().width

    def recording(stderr: bool = False) -> Any:
        console = real(stderr)
        console.file, console.width = buffer, width
        return console

    rich_utils._get_rich_console = recording
    try:
        show()
    finally:
        rich_utils._get_rich_console = real
    return buffer.getvalue()


def _fitted_help(obj: click.Command, ctx: click.Context, framed: Callable[[], None]) -> None:
    """Print ``framed()`` (Typer's framed help: options in a table, names beside their text) where it shows every
    option name and text whole and takes no more lines than :func:`_stacked_help`; otherwise the stacked help. The
    table cuts what does not fit with '…' (``--targe…`` at 40 columns) and squeezes the text into a thin column on a
    narrow terminal (a 20-column text beside ``--target-model-dir -t TEXT`` at 80), which makes it taller."""
    from typer import rich_utils

    table = _rendered(lambda: rich_utils.rich_format_help(obj=obj, ctx=ctx, markup_mode="rich"))
    if "\u2026" not in table and table.count("\n") <= _rendered(lambda: _stacked_help(obj, ctx)).count("\n"):
        framed()
    else:
        _stacked_help(obj, ctx)


def _range_text(param: click.Parameter) -> str:
    """A number option's bounds as the framed help shows them (``x>=1``, ``0<=x<=1``), or ''."""
    info: dict[str, Any] = dict(param.type.to_info_dict())
    lo, hi = info.get("min"), info.get("max")
    if not isinstance(param, click.Option) or (lo is None and hi is None):
        return ""
    lop, hop = ("<" if info["min_open"] else "<="), ("<" if info["max_open"] else "<=")
    if hi is None:
        return f"x{'>' if info['min_open'] else '>='}{lo}"
    return f"x{hop}{hi}" if lo is None else f"{lo}{lop}x{hop}{hi}"


def _stacked_help(obj: click.Command, ctx: click.Context) -> None:
    """Typer's framed help for a terminal too narrow for its option table: the same usage line, text, panels,
    colours, defaults and ranges, with each option's names (and metavar) on a line of their own and its help below
    them, indented and wrapped between words, so that no name is cut and no text is squeezed into a thin column."""
    from rich.console import Group as Stack
    from rich.console import RenderableType
    from rich.padding import Padding
    from rich.panel import Panel
    from rich.text import Text
    from typer import rich_utils as R

    console = R._get_rich_console()
    console.print(Padding(R.highlighter(obj.get_usage(ctx)), 1), style=R.STYLE_USAGE_COMMAND)
    if obj.help:
        console.print(Padding(R._get_help_text(obj=obj, markup_mode="rich"), (0, 1, 1, 1)))

    def panel(title: str, blocks: list[RenderableType]) -> None:
        if blocks:
            console.print(Panel(Stack(*blocks), border_style=R.STYLE_OPTIONS_PANEL_BORDER, title=title,
                                title_align=R.ALIGN_OPTIONS_PANEL))

    def block(head: Text, body: RenderableType) -> RenderableType:
        return Stack(head, Padding(body, (0, 0, 0, 4)))

    arguments: list[RenderableType] = []
    options: list[RenderableType] = []
    for param in obj.get_params(ctx):
        if getattr(param, "hidden", False):
            continue
        body = R._get_parameter_help(param=param, ctx=ctx, markup_mode="rich")
        if isinstance(param, click.Argument):
            head = Text(param.make_metavar(ctx), style=R.STYLE_OPTION)
            head.append(f" {param.type.name.upper()}", style=R.STYLE_METAVAR)
            arguments.append(block(head, body))
            continue
        head = Text()
        for i, name in enumerate(sorted(param.opts, key=lambda o: not o.startswith("--"))):
            head.append(", " if i else "")
            head.append(name, style=R.STYLE_OPTION if name.startswith("--") else R.STYLE_SWITCH)
        for name in param.secondary_opts:
            head.append(" / ")
            head.append(name, style=R.STYLE_NEGATIVE_OPTION)
        metavar = param.make_metavar(ctx)
        if metavar != "BOOLEAN" and not (isinstance(param, click.Option) and param.is_flag):
            head.append(f" {metavar}", style=R.STYLE_METAVAR)
        if _range_text(param):
            head.append(f" [{_range_text(param)}]", style=R.STYLE_METAVAR_SEPARATOR)
        options.append(block(head, body))
    panel(R.ARGUMENTS_PANEL_TITLE, arguments)
    panel(R.OPTIONS_PANEL_TITLE, options)
    if isinstance(obj, click.Group):
        commands = [c for c in (obj.get_command(ctx, n) for n in obj.list_commands(ctx)) if c and not c.hidden]
        panel(R.COMMANDS_PANEL_TITLE, [
            block(Text(c.name or "", style=R.STYLE_COMMANDS_TABLE_FIRST_COLUMN),
                  R._make_command_help(help_text=c.short_help or c.help or "", markup_mode="rich"))
            for c in commands])
    if obj.epilog:
        console.print(Padding(R._make_rich_text(text=obj.epilog, markup_mode="rich"), 1))


class _FittedHelp(TyperCommand):
    """A command whose help is Typer's framed help where its option table fits the terminal, and the same help with
    each option's names above its text (:func:`_stacked_help`) on a narrow one (:func:`_fitted_help`)."""

    def format_help(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        _fitted_help(self, ctx, lambda: TyperCommand.format_help(self, ctx, formatter))


class _OneLineUsageErrors(TyperGroup):
    """Usage errors (a missing argument, an unknown option or choice) as one ``error:`` line on stderr, exit 2,
    like every other error of the tool, instead of Typer's framed box; help fitted like :class:`_FittedHelp`'s."""

    def format_help(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        _fitted_help(self, ctx, lambda: TyperGroup.format_help(self, ctx, formatter))

    def main(self, args: Sequence[str] | None = None, prog_name: str | None = None, complete_var: str | None = None,
             standalone_mode: bool = True, windows_expand_args: bool = True, **extra: Any) -> Any:
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, standalone_mode, windows_expand_args, **extra)
        try:
            rv = super().main(args, prog_name, complete_var, False, windows_expand_args, **extra)
        except click.exceptions.NoArgsIsHelpError as e:  # no arguments: the help (plain help comes as the message)
            message = e.format_message()
            if message:
                STDOUT.write(message + "\n")
                STDOUT.flush()
            sys.exit(0)
        except click.ClickException as e:
            from .render import print_error

            message = e.format_message().rstrip(".")
            if not message and not args_given(args):  # no arguments at all: the help was asked for, and printed
                sys.exit(0)
            if message:  # empty: a group without its command, the help was printed (no_args_is_help)
                ctx = getattr(e, "ctx", None)
                where = f"; see '{ctx.command_path} -h'" if ctx is not None else ""
                print_error(f"{message}{where}")
            sys.exit(e.exit_code)
        except click.Abort:
            sys.stderr.write("error: aborted\n")
            sys.exit(1)
        sys.exit(rv if isinstance(rv, int) else 0)


def args_given(args: Sequence[str] | None) -> bool:
    """Whether the command line has any argument (``args`` None: the process's own)."""
    return bool(sys.argv[1:] if args is None else args)


app = typer.Typer(cls=_OneLineUsageErrors, no_args_is_help=True, add_completion=True, pretty_exceptions_enable=False,
                  context_settings={"help_option_names": ["-h", "--help"]}, rich_markup_mode="rich",
                  help=SUMMARY)
T = TypeVar("T")

# Where inspect/check/diff take a GGUF file, a Hub file or URL works too (header only, over HTTP range requests).
GGUF_REF_HELP = "local path, hf://ORG/REPO/file.gguf\\[@REV], ORG/REPO/file.gguf or an https:// URL (remote: header only)"
MaxHeaderMiB = Annotated[int, typer.Option("--max-header-mib", min=1, help="Remote files: refuse a header larger than this many MiB.")]
Timeout = Annotated[float, typer.Option("--timeout", min=0.001, help="Remote files: seconds to wait for a connection or data (then retried twice).")]


Deadline = Annotated[float, typer.Option("--deadline", min=0.001, help="Remote files: seconds for the whole read, retries included (a slow or dripping server is abandoned).")]


def remote_options(max_header_mib: int, timeout: float, deadline: float = 300.0) -> Any:
    """The RemoteOptions of the remote-file flags."""
    import time

    from .gguffile.options import RemoteOptions

    return RemoteOptions(max_header_bytes=max_header_mib << 20, timeout=timeout, deadline=deadline,
                         started=time.monotonic())


class _State:
    """What an interrupt interrupts (for its one line): set by the commands as they go."""

    doing = "starting"
    written: str | None = None  # a file this command wrote in full


class OutType(str, enum.Enum):
    """``--outtype`` choices (matched case-insensitively: ``BF16`` is ``bf16``)."""

    f32 = "f32"
    f16 = "f16"
    bf16 = "bf16"
    q8_0 = "q8_0"
    auto = "auto"


def _version(value: bool) -> None:
    if value:
        from .formats.native import describe

        sys.stdout.write(f"dspark-convert {__version__}\n{describe()}\n")
        raise typer.Exit()


@app.callback(help=SUMMARY)
def _main_options(
    version: Annotated[bool, typer.Option("--version", callback=_version, is_eager=True,
                                          help="Print the version, which kernels convert (compiled or numpy forms), and exit.")] = False,
) -> None:
    """The options before the command (the help is :data:`SUMMARY`)."""


def _written_now() -> str | None:
    """The file this command wrote, if any: noted by the CLI, or (interrupted between the commit and the CLI
    noting it) the destination that holds the new file now."""
    if _State.written is not None:
        return _State.written
    dest = sys.modules.get("dspark_convert.hf2gguf.destination")
    written = dest.written_here() if dest is not None else None
    return str(written) if written is not None else None


def run_or_exit(fn: Callable[[], T], doing: str) -> T:
    """Run ``fn`` (``doing`` says what it does, for an interrupt's line); a ConvertError becomes one line on stderr
    and exit code 2, an interrupt one line and 130 / 143."""
    _State.doing = doing
    try:
        return fn()
    except ConvertError as e:
        from .render import print_error

        print_error(str(e))
        raise typer.Exit(2) from None
    except Interrupted as e:
        from .render import print_error

        print_error(interrupted_line(e, doing, _written_now()))
        raise typer.Exit(e.exit_code) from None
    finally:
        _State.doing = "printing the result"


def print_json(data: Any) -> None:
    """One strict JSON document on stdout (NaN/Inf as strings, see render.dumps_json)."""
    from .render import dumps_json

    STDOUT.write(dumps_json(data) + "\n")


@app.command(help=HF2GGUF_HELP)
def hf2gguf(
    draft: Annotated[str, typer.Argument(metavar="DRAFT", show_default=False,
                                         help="Draft checkpoint: a local folder or a Hub repo id (org/name\\[@rev]).")],
    target_model_dir: Annotated[str | None, typer.Option("--target-model-dir", "-t", metavar="TARGET", help=f"Target model: folder or Hub repo id (tokenizer, config). Optional for {' or '.join(W.DRAFTS_INSIDE_TARGETS)}: its own tokenizer.")] = None,
    outfile: Annotated[str | None, typer.Option("--outfile", "-o", metavar="FILE", help="Output file; {ftype} and {outtype} are expanded. Default: the GGUF naming convention, in the current folder.")] = None,
    outtype: Annotated[OutType, typer.Option(case_sensitive=False, help="Tensor type; auto keeps the checkpoint's 16-bit type (F32 checkpoints: f16).")] = OutType.auto,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Print the plan (keys, tensors, types, sizes) and write nothing.")] = False,
    force: Annotated[bool, typer.Option("--force", help="Overwrite an existing output file.")] = False,
    with_target_embeddings: Annotated[bool, typer.Option("--with-target-embeddings", help="Self-contained draft: copy the target's token_embd (and output) into the GGUF.")] = False,
    allow_nonfinite: Annotated[bool, typer.Option("--allow-nonfinite", help="Convert tensors holding NaN/Inf instead of refusing.")] = False,
    metadata: Annotated[Path | None, typer.Option("--metadata", help="JSON file overriding general.* metadata.")] = None,
    model_name: Annotated[str | None, typer.Option("--model-name", help="Override general.name.")] = None,
    ignore_target_mismatch: Annotated[bool, typer.Option("--ignore-target-mismatch", help="Convert even when the draft does not fit the target (hidden size, layers, vocabulary): the errors become warnings.")] = False,
    architecture: Annotated[str | None, typer.Option("--architecture", help="Convert as this architectures value (e.g. Qwen3DSparkModel) instead of the one config.json declares.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable summary on stdout.")] = False,
    no_cache: Annotated[bool, typer.Option("--no-cache", help="Neither use nor update the cached tokenizer block of the target.")] = False,
    upstream_draft_flag: Annotated[bool, typer.Option(UPSTREAM_FLAG.option, help=UPSTREAM_FLAG.help)] = False,
    upstream_draft_flag_2: Annotated[bool, typer.Option(UPSTREAM_FLAG_2.option, help=UPSTREAM_FLAG_2.help)] = False,
    match_upstream: Annotated[bool, typer.Option("--match-upstream", help="Write llama.cpp b11434's bytes exactly, even its layout that drafts with token_embd as the head on an untied target (default: add the target's head as output.weight).")] = False,
) -> None:
    """The ``hf2gguf`` command (its help is :data:`HF2GGUF_HELP`, one line: Typer re-wraps within a line only)."""
    from .hf2gguf.conversion import convert
    from .render import byte_progress, make_console, print_warning, render_conversion


    with byte_progress(not as_json and not dry_run, "converting") as progress:
        result = run_or_exit(lambda: convert(draft, target_model_dir, outfile, outtype=outtype.value, force=force, dry_run=dry_run,
                                             embed_from_target=with_target_embeddings, allow_nonfinite=allow_nonfinite,
                                             metadata=metadata, model_name=model_name, **{UPSTREAM_FLAG.keyword: upstream_draft_flag, UPSTREAM_FLAG_2.keyword: upstream_draft_flag_2},
                                             progress=progress, ignore_target_mismatch=ignore_target_mismatch,
                                             architecture=architecture, cache=not no_cache,
                                             match_upstream=match_upstream),
                             f"converting {draft}" + ("" if dry_run else ", before writing"))
    if not dry_run:
        _State.written = str(result.path)
    if result.path is not None and not str(result.path).lower().endswith(".gguf"):
        print_warning(f"-o {result.path}: the name does not end in .gguf (llama.cpp loads it anyway; tools and "
                      "people look for .gguf)")
    if as_json:
        from .render import conversion_to_dict

        print_json(conversion_to_dict(result))
    else:
        render_conversion(result, make_console())


@app.command()
def check(
    file: Annotated[str, typer.Argument(help=f"A GGUF draft file, made by any tool: {GGUF_REF_HELP}.")],
    target: Annotated[str | None, typer.Option("--target", "-t", help="Also check the draft against this target: a target GGUF (header only, any size; local, hf:// or a URL), a target model folder or a Hub repo id.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable findings on stdout.")] = False,
    max_header_mib: MaxHeaderMiB = 512,
    timeout: Timeout = 30.0,
    deadline: Deadline = 300.0,
) -> None:
    """Check a GGUF draft against llama.cpp's loader rules (exit 1 on any error); with --target, also against llama.cpp's draft/target rules (exit 1 when one fails)."""
    if target is not None:
        from .fit import check_fit

        report = run_or_exit(lambda: check_fit(file, target, remote=remote_options(max_header_mib, timeout, deadline)),
                             f"checking {file} against {target}")
        if as_json:
            print_json(report.to_dict())
        else:
            from .render import make_console, render_fit

            render_fit(report, make_console())
        raise typer.Exit(0 if report.ok else 1)
    from .check import check_plan, errors, spec_type
    from .gguffile.source import plan_from_source

    plan, source = run_or_exit(lambda: plan_from_source(file, remote_options(max_header_mib, timeout, deadline)),
                               f"reading {file}")
    from .check import stale_layout

    findings = check_plan(plan) + stale_layout(file, plan)  # + the upgrade's staleness warnings
    ok = not errors(findings)
    st = spec_type(plan)
    from .check import spec_type_warning

    spec_warning = spec_type_warning(st) if ok else None  # a file that does not load is served with no --spec-type
    from .registry.spectype import hub_name

    hub = hub_name(file, st.spec_type) if st.spec_type is not None and ok else None  # what -hf makes of its name
    if as_json:
        print_json({"file": str(file), "arch": plan.arch, "ok": ok,
                    "findings": [f.to_dict() for f in findings],
                    "spec_type": st.to_dict() if st.spec_type is not None and ok else None,
                    "hf_name": hub.to_dict() if hub is not None else None,
                    **({"source": source.to_dict()} if source else {})})
    else:
        from .render import line, make_console, render_findings, render_source, text

        console = make_console()
        render_findings(file, plan.arch, findings, console)
        if st.spec_type is not None and ok:  # the reason once: in the warning when there is one
            line(console, text(st.line(reason=spec_warning is None), limit=1 << 16))
        if source is not None:
            render_source(source.to_dict(), console)
    from .render import print_warning

    if spec_warning is not None:
        print_warning(spec_warning)
    if hub is not None and hub.problem is not None:
        print_warning(hub.problem)
    raise typer.Exit(0 if ok else 1)


@app.command()
def inspect(
    file: Annotated[str, typer.Argument(help=f"A GGUF file (only its header is read, unless --stats): {GGUF_REF_HELP}.")],
    as_json: Annotated[bool, typer.Option("--json", help="JSON on stdout (schema: docs/inspect.md).")] = False,
    full_arrays: Annotated[bool, typer.Option("--full-arrays", help="Show values in full: whole arrays, and long strings (the chat template) as written, below the table.")] = False,
    filter: Annotated[str | None, typer.Option("--filter", help="Glob on KV and tensor names, e.g. 'blk.0.*'.")] = None,
    stats: Annotated[bool, typer.Option("--stats", help="Per-tensor min/max/mean/std/NaN/Inf (reads the data).")] = False,
    no_tensors: Annotated[bool, typer.Option("--no-tensors", help="Leave out the tensor list.")] = False,
    max_header_mib: MaxHeaderMiB = 512,
    timeout: Timeout = 30.0,
    deadline: Deadline = 300.0,
) -> None:
    """Show a GGUF file's metadata, tensors, tokenizer and totals."""
    from .inspect import inspect_gguf
    from .render import make_console, render_inspect

    info = run_or_exit(lambda: inspect_gguf(file, full_arrays=full_arrays, tensors=not no_tensors, filter=filter,
                                            stats=stats, remote=remote_options(max_header_mib, timeout, deadline)),
                       f"reading {file}")
    if as_json:
        print_json(info)
    else:
        render_inspect(info, make_console(), full=full_arrays, filter=filter)


@app.command()
def diff(
    a: Annotated[str, typer.Argument(help=f"First GGUF file (the reference for NMSE): {GGUF_REF_HELP}.")],
    b: Annotated[str, typer.Argument(help="Second GGUF file (the same forms).")],
    as_json: Annotated[bool, typer.Option("--json", help="JSON on stdout (schema: docs/inspect.md).")] = False,
    ignore: Annotated[list[str] | None, typer.Option("--ignore", help="Glob of KV/tensor names to skip (repeatable).")] = None,
    no_stats: Annotated[bool, typer.Option("--no-stats", help="Compare bytes only, no max-abs-diff/NMSE.")] = False,
    ignore_order: Annotated[bool, typer.Option("--ignore-order", help="KV and tensor order do not count.")] = False,
    max_header_mib: MaxHeaderMiB = 512,
    timeout: Timeout = 30.0,
    deadline: Deadline = 300.0,
) -> None:
    """Compare two GGUF files: exit 0 when equal, 1 when different, 2 on error."""
    from .diff import diff_gguf
    from .render import make_console, render_diff

    result = run_or_exit(lambda: diff_gguf(a, b, ignore=ignore or [], tensor_stats=not no_stats,
                                           ignore_order=ignore_order, remote=remote_options(max_header_mib, timeout, deadline)),
                         f"comparing {a} and {b}")
    if as_json:
        print_json(result)
    else:
        render_diff(result, make_console())
    raise typer.Exit(0 if result["equal"] else 1)


@app.command("verify")
def verify_cmd(
    gguf_file: Annotated[str, typer.Argument(help="The converted GGUF draft (a local file: verify reads its tensors).")],
    hf: Annotated[str, typer.Option("--hf", help="The original Hugging Face draft: a folder (config.json + safetensors) or a Hub repo id (org/name\\[@rev]).")],
    target_model_dir: Annotated[str | None, typer.Option("--target-model-dir", "-t", help=f"Target folder or Hub repo id (embeddings, lm_head, config); not needed for a {' or '.join(W.FILES_INSIDE_TARGETS)} file.")] = None,
    context: Annotated[int, typer.Option(help="Context positions of the middle input case (cases: context/4, context, 4*context).")] = 16,
    seed: Annotated[int, typer.Option(help="Seed of the random features and tokens.")] = 0,
    steps: Annotated[int, typer.Option(help=f"{' / '.join(W.CHAINED_DRAFTS)}: chained draft steps.")] = 3,
    quality: Annotated[bool, typer.Option("--quality/--no-quality", help="Also compare with the unrounded checkpoint (information).")] = True,
    as_json: Annotated[bool, typer.Option("--json", help="JSON report on stdout (schema: docs/verify.md).")] = False,
) -> None:
    """Compare the GGUF (numpy) and the storage-rounded HF (torch) forwards component by component: exit 0 pass, 1 fail, 2 error."""
    from .render import make_console, render_verify
    from .verify import verify

    report = run_or_exit(lambda: verify(gguf_file, hf, target_model_dir, context=context, seed=seed, steps=steps,
                                        quality=quality), f"verifying {gguf_file}")
    if as_json:
        print_json(report.to_dict())
    else:
        render_verify(report, make_console())
    raise typer.Exit(0 if report.passed else 1)


@app.command()
def upgrade(
    old: Annotated[str, typer.Argument(metavar="OLD.gguf", help="A draft GGUF made by an older converter: a local file (--dry-run: also hf:// or a URL, header only).")],
    outfile: Annotated[str | None, typer.Option("--outfile", "-o", metavar="NEW.gguf", help="Output file (default: OLD.upgraded.gguf beside the input).")] = None,
    target: Annotated[str | None, typer.Option("--target", "-t", metavar="TARGET", help="The target model, header only: a folder, a Hub repo id, or a target GGUF (local, hf:// or a URL). Gives M-RoPE sections, Gemma embedding scale, tokenizer add_bos/add_eos, tied or untied head.")] = None,
    hf: Annotated[str | None, typer.Option("--hf", metavar="CHECKPOINT", help="The draft's checkpoint folder: supplies tensors the old file lacks (embed_tokens) and proves a double NeoX permutation.")] = None,
    match_upstream: Annotated[bool, typer.Option("--match-upstream", help="Write llama.cpp b11434's layout exactly (no output.weight added for an untied target).")] = False,
    from_revision: Annotated[str | None, typer.Option("--from-revision", metavar="bNNNN", help="The upstream revision that made the file, if known (b10662-b11104 permuted the interleaved-RoPE q/k of some drafts twice: docs/upgrade.md).")] = None,
    rope_interleaved: Annotated[bool, typer.Option("--rope-interleaved", help="The draft checkpoint says rope_is_neox_style: false (with --from-revision).")] = False,
    no_embed_tokens: Annotated[bool, typer.Option("--no-embed-tokens", help="The draft checkpoint stores no embed_tokens (what --hf would tell).")] = False,
    embed_tokens_from_target: Annotated[bool, typer.Option("--embed-tokens-from-target", help="The draft checkpoint's embed_tokens is the target's frozen copy: take token_embd from --target.")] = False,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="List what would change; write nothing.")] = False,
    force: Annotated[bool, typer.Option("--force", help="Overwrite an existing output file.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable summary on stdout.")] = False,
) -> None:
    """Bring a draft GGUF made by an older converter up to llama.cpp b11434, copying unchanged tensor data byte for byte (docs/upgrade.md)."""  # one line: Typer re-wraps within a line only
    from .upgrade import upgrade as run_upgrade

    result = run_or_exit(lambda: run_upgrade(old, outfile, target=target, hf=hf, match_upstream=match_upstream,
                                             dry_run=dry_run, force=force, from_revision=from_revision,
                                             rope_interleaved=rope_interleaved, no_embed_tokens=no_embed_tokens,
                                             embed_tokens_from_target=embed_tokens_from_target),
                         f"upgrading {old}")
    if result.path is not None:
        _State.written = str(result.path)
    if as_json:
        print_json(result.to_dict())
        raise typer.Exit(2 if result.refused else 0)
    lines = [f"{old}: layout of upstream {result.staleness.describe_revisions()}"]
    lines += [f"  {'would change' if dry_run else 'changed'}: {c}" for c in result.changes] or ["  nothing stale"]
    lines += [f"  not checked: {u}" for u in result.staleness.unchecked]  # each item names what would check it
    lines += [f"  note: {n}" for n in result.notes]
    if result.path is not None:
        from .render import size_text

        lines.append(f"wrote {result.path}: {size_text(result.size or 0)}")
    from .render import line, make_console, text

    console = make_console()  # wraps between words on a terminal, one line per item in a pipe
    for item in lines:
        line(console, text(item, limit=1 << 16))
    if result.refused:  # a dry run of an upgrade that cannot be done: the same line and exit code as the real run
        from .render import print_error

        print_error(result.refused)
        raise typer.Exit(2)


# ------------------------------------------------------------------------------------------------ MTP cuts
MtpOut = Annotated[str | None, typer.Option("--outfile", "-o", metavar="FILE", help="Output file (default: see docs/mtp.md).")]
MtpForce = Annotated[bool, typer.Option("--force", help="Overwrite an existing output file.")]
MtpVerify = Annotated[bool, typer.Option("--verify", help="Re-read the output: every tensor byte-equal to its source, every KV kept, changed or dropped by a rule.")]
MtpJson = Annotated[bool, typer.Option("--json", help="Machine-readable summary on stdout.")]


def _cut(run: Callable[..., Any], doing: str, as_json: bool, description: str) -> None:
    """Run an MTP cut with a progress bar, then print its summary (or JSON); exit 1 when --verify fails."""
    from .render import byte_progress

    with byte_progress(not as_json, description) as bar:
        state = {"done": 0, "total": 0}

        def ready(plan: Any) -> None:
            state["total"] = plan.data_bytes

        def step(n: int) -> None:
            state["done"] += n
            if bar is not None:
                bar(state["done"], state["total"])

        result = run_or_exit(lambda: run(progress=step, plan_ready=ready), doing)
    _State.written = str(result.path)
    if as_json:
        print_json(result.to_dict())
    else:
        from .render.mtp import cut_lines

        STDOUT.write("\n".join(cut_lines(result)) + "\n")
    if result.report is not None and not result.report.passed:
        raise typer.Exit(1)


@app.command("mtp-extract")
def mtp_extract(
    file: Annotated[str, typer.Argument(metavar="TARGET.gguf", help="A full target GGUF with MTP layers (any tensor type; single or split): a local path, hf://ORG/REPO/file.gguf\\[@REV] or an https:// URL (remote: only the sidecar's bytes are fetched).")],
    outfile: MtpOut = None,
    force: MtpForce = False,
    verify: MtpVerify = False,
    as_json: MtpJson = False,
    timeout: Timeout = 30.0,
    deadline: Annotated[float, typer.Option("--deadline", min=0.001, help="Remote files: seconds for the whole fetch, retries included.")] = 3600.0,
) -> None:
    """Cut the MTP sidecar (what upstream's convert_hf_to_gguf.py --mtp writes) out of a full target GGUF; default name mtp-NAME.gguf."""
    from .mtp.run import extract

    _cut(lambda **kw: extract(file, outfile, force=force, verify=verify,
                              remote=remote_options(512, timeout, deadline), **kw),
         f"extracting the MTP sidecar of {file}", as_json, "extracting")


@app.command("mtp-strip")
def mtp_strip(
    file: Annotated[str, typer.Argument(metavar="TARGET.gguf", help="A full local target GGUF with MTP layers (single or split).")],
    outfile: MtpOut = None,
    force: MtpForce = False,
    verify: MtpVerify = False,
    as_json: MtpJson = False,
) -> None:
    """Write the trunk of a full target GGUF without its MTP layers (what upstream's --no-mtp writes); default name NAME-trunk.gguf."""
    from .mtp.run import strip

    _cut(lambda **kw: strip(file, outfile, force=force, verify=verify, **kw), f"stripping the MTP layers of {file}",
         as_json, "stripping")


@app.command("mtp-graft")
def mtp_graft(
    trunk: Annotated[str, typer.Argument(metavar="TRUNK.gguf", help="A trunk GGUF (mtp-strip's or upstream's --no-mtp).")],
    sidecar: Annotated[str, typer.Argument(metavar="MTP.gguf", help="Its MTP sidecar (mtp-extract's or upstream's --mtp).")],
    outfile: MtpOut = None,
    force: MtpForce = False,
    verify: MtpVerify = False,
    as_json: MtpJson = False,
) -> None:
    """Put a trunk and its MTP sidecar back into one full target GGUF; default name TRUNK-grafted.gguf."""
    from .mtp.run import graft

    _cut(lambda **kw: graft(trunk, sidecar, outfile, force=force, verify=verify, **kw),
         f"grafting {sidecar} onto {trunk}", as_json, "grafting")


@app.command()
def bench(
    target: Annotated[str, typer.Argument(metavar="TARGET.gguf", help="The target GGUF: a local file or a Hub file (hf://ORG/REPO/file.gguf\\[@REV], downloaded to the Hub cache first).")],
    drafts: Annotated[list[str], typer.Argument(metavar="DRAFT.gguf...", help="One or more draft GGUFs (the same forms), measured side by side.")],
    prompts: Annotated[Path | None, typer.Option("--prompts", metavar="FILE", help="Prompts: one a line, or JSONL with a \"prompt\" field (text or token ids). Default: the built-in set (36 short prompts: chat, code, math, summarisation; not a published benchmark).")] = None,
    n_predict: Annotated[int, typer.Option("-n", "--n-predict", min=1, help="Tokens generated per prompt (EOS ignored).")] = 128,
    repeat: Annotated[int, typer.Option("--repeat", min=1, help="Rounds: each round runs the plain target, then each draft, over every prompt.")] = 1,
    ctx_size: Annotated[int, typer.Option("--ctx-size", min=8, help="llama-server's -c.")] = 4096,
    threads: Annotated[int | None, typer.Option("--threads", min=1, help="llama-server's -t (default: the CPU count, at most 8).")] = None,
    spec_draft_n_max: Annotated[int | None, typer.Option("--spec-draft-n-max", min=1, help="Tokens per draft (default: each draft's whole block; 4 steps for a chained draft).")] = None,
    llama_server: Annotated[Path | None, typer.Option("--llama-server", metavar="PATH", help="The llama-server binary (default: $DSPARK_LLAMA_SERVER, then PATH, then the project's build of llama.cpp b11434).")] = None,
    raw: Annotated[bool, typer.Option("--raw", help="Send text prompts as they are (default: through the target's chat template, when it has one).")] = False,
    timeout: Annotated[float, typer.Option("--timeout", min=1.0, help="Seconds llama-server may take to load and answer /health (each request may take at least 600).")] = 300.0,
    server_arg: Annotated[list[str] | None, typer.Option("--server-arg", metavar="ARG", help="An extra llama-server argument, passed to every server (repeatable, e.g. --server-arg=-ngl --server-arg=99).")] = None,
    plot: Annotated[Path | None, typer.Option("--plot", metavar="FILE.svg", help="Also write acceptance by draft position as an SVG picture.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="JSON report on stdout (schema: docs/bench.md).")] = False,
) -> None:
    """Measure drafts in llama-server: lossless output, acceptance (overall and by draft position), tokens/s and speed-up against the target alone (exit 1 if an output differs, 2 on an error)."""
    from .llamacpp.bench import bench as run_bench
    from .llamacpp.bench import load_prompts, write_plot
    from .llamacpp.server import ServerError
    from .render import make_console, print_error
    from .render.bench import bench_svg, count_progress, render_bench

    plist = run_or_exit(lambda: load_prompts(prompts), f"reading {prompts}") if prompts is not None else None

    def measure(progress: Callable[[int, int, str], None] | None) -> Any:
        try:
            return run_bench(target, drafts, prompts=plist, n_predict=n_predict, repeat=repeat, ctx_size=ctx_size,
                             threads=threads, spec_draft_n_max=spec_draft_n_max, llama_server=llama_server, raw=raw,
                             timeout=timeout, server_args=server_arg or [], progress=progress)
        except ServerError as e:  # the target (or the plain run) failed: its reason, then the end of its log
            print_error(str(e))
            _log_tail(e.log_tail)
            raise typer.Exit(2) from None

    with count_progress(not as_json, "measuring") as progress:
        report = run_or_exit(lambda: measure(progress), f"running llama-server on {target}")
    if as_json:
        print_json(report.to_dict())
    else:
        render_bench(report, make_console())
    if plot is not None:
        run_or_exit(lambda: write_plot(plot, bench_svg(report)), f"writing {plot}")
    for d in report.drafts:
        if d.error is not None:
            print_error(d.error)
            _log_tail(d.log_tail)
    if report.interrupted and report.signum is not None:
        print_error(f"{report.interrupted}: llama-server stopped; the report holds what was measured until then")
        raise typer.Exit(128 + report.signum)
    if any(d.error is not None for d in report.drafts):
        raise typer.Exit(2)
    raise typer.Exit(0 if report.lossless else 1)


def _log_tail(lines: list[str]) -> None:
    """The last lines of a llama-server log under an error line, indented."""
    if lines:
        sys.stderr.write("  llama-server's log ended with:\n" + "".join(f"  | {ln}\n" for ln in lines))


class _OneLineWarnings(logging.Handler):
    """Library warnings (fallbacks, recognised-by-regex tokenizers, ...) as one 'warning:' line each on stderr."""

    def emit(self, record: logging.LogRecord) -> None:
        from .render import print_warning

        print_warning(record.getMessage())


for _info in app.registered_commands:  # every command's help: framed where it fits, plain where it would be cut
    if _info.cls in (None, TyperCommand):
        _info.cls = _FittedHelp


def main() -> None:
    """Run the command line (the console script goes through :func:`dspark_convert.entry.main`, which puts the
    interrupt rule in place before this module is imported). The command's exit stands only if no interrupt came
    before the end: a signal taken while the command ended gives its one line and 130 / 143, and one after that
    ends the process by the signal (:func:`~dspark_convert.interrupts.settle_signals`), never a verdict's code."""
    install_signal_handlers()
    root = logging.getLogger("dspark_convert")
    if not root.handlers:
        root.addHandler(_OneLineWarnings(logging.WARNING))
        root.propagate = False
    logging.getLogger("gguf").setLevel(logging.ERROR)  # gguf-py's own info/debug chatter is not for users
    try:
        _run_app()
        ending = SystemExit(0)
    except SystemExit as e:
        ending = e
    except Interrupted as e:  # while reporting another interrupt or an output error
        ending = SystemExit(e.exit_code)
    try:
        late = settle_signals()
    except Interrupted as e:  # between the end of the command and settling
        late = e
    if late is not None and ending.code not in (130, 143):
        sys.stderr.write(f"error: {interrupted_line(late, _State.doing, _written_now())}\n")
        sys.stderr.flush()
        raise SystemExit(late.exit_code) from None
    raise ending


def _run_app() -> None:
    """The command line itself: ends with SystemExit (its exit code), an interrupt or output error as one line."""
    try:
        try:
            app(prog_name="dspark-convert")
        finally:  # the result is on stdout before the exit code is: a full disk is seen here, not at exit
            STDOUT.flush()
    except Interrupted as e:  # outside a library call (parsing arguments, printing the result)
        sys.stderr.write(f"error: {interrupted_line(e, _State.doing, _written_now())}\n")
        sys.stderr.flush()
        raise SystemExit(e.exit_code) from None
    except OutputError as e:  # standard output cannot be written (a closed pipe is not an error: see GuardedStdout)
        from .render import print_error

        print_error(str(e))
        raise SystemExit(2) from None


if __name__ == "__main__":  # python -m dspark_convert.cli
    main()
