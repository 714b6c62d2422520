"""Every code block of README.md and docs/**/*.md runs as written, and shows what it prints.

The conventions, for whoever writes the documentation (README.md, "The examples are
tests", says the same for readers):

- A block fenced ```` ```python ```` (or ```` ```py ````) runs. The blocks of one markdown
  file run in order, in one fresh Python process and one namespace, as if a reader typed
  them into one session: a later block may use what an earlier block of the same file
  defined or imported. Each block is saved as a file of its own before it runs (pcbatch
  compiles batched functions from their source file), named after the markdown file and
  the block's line, and padded so that a line number in a traceback is the line of the
  markdown file.
- A block fenced ```` ```output ```` right after a python block is what that block prints
  to stdout. Lines are compared after trailing blanks are stripped; ``...`` inside a line
  stands for any text, and a line that is only ``...`` for any number of lines.
- A block fenced without a language, or ```` ```text ````, is a diagram or a message, not
  code, and is not run.
- A block that cannot run in a test (a shell command, several hosts, a GPU), and any
  block of another language, has ``<!-- skip: the reason -->`` on the nearest non-blank
  line before its fence. A skipped python block is still compiled, so its syntax is
  checked. A block of another language without the mark fails the test.
- Every other python block runs in the fast tier (the README's test command), so each is
  sized to run in seconds: few chains and draws, with a sentence saying what a real run
  would use. There is no slow-only mark.

The processes run in a temporary directory, with this checkout first on ``PYTHONPATH``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import json
import os
import pathlib
import re
import subprocess
import sys
import time

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]

RUN = {"python", "py"}
OUTPUT = "output"
PROSE = {"", "text"}


def _name(path: pathlib.Path) -> str:
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else path.name


_FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})(?P<info>[^`]*)$")
_MARK = re.compile(r"^\s*<!--\s*(?P<mark>\w+):\s*(?P<reason>\S.*?)\s*-->\s*$")


@dataclasses.dataclass
class Block:
    """One fenced block of a markdown file."""

    path: pathlib.Path
    line: int  # of the opening fence, counted from 1
    language: str
    source: str
    skip: str | None = None  # the reason given by a skip mark
    output: str | None = None  # what it prints, from the output block after it

    @property
    def where(self) -> str:
        return f"{_name(self.path)}:{self.line}"


def parse(path: pathlib.Path) -> list[Block]:
    """The fenced blocks of ``path``, each python block with its expected output."""
    lines = path.read_text().splitlines()
    blocks: list[Block] = []
    i = 0
    while i < len(lines):
        opening = _FENCE.match(lines[i])
        if opening is None:
            i += 1
            continue
        fence, indent = opening["fence"], opening["indent"]
        closing = re.compile(rf"^[ \t]*{re.escape(fence[0])}{{{len(fence)},}}[ \t]*$")
        end = i + 1
        while end < len(lines) and not closing.match(lines[end]):
            end += 1
        if end == len(lines):
            raise ValueError(f"{_name(path)}:{i + 1}: the block is never closed")
        body = [line.removeprefix(indent) for line in lines[i + 1 : end]]
        before = next((line for line in reversed(lines[:i]) if line.strip()), "")
        mark = _MARK.match(before)
        if mark and mark["mark"] != "skip":
            raise ValueError(
                f"{_name(path)}:{i + 1}: <!-- {mark['mark']}: --> is no mark (only skip is): "
                "every other block runs in the fast tier, so size it to run in seconds"
            )
        reasons = {mark["mark"]: mark["reason"]} if mark else {}
        info = opening["info"].split()
        language = info[0].lower() if info else ""
        source = "".join(line + "\n" for line in body)
        blocks.append(Block(path, i + 1, language, source, **reasons))
        i = end + 1
    return _attach_outputs(blocks)


def _attach_outputs(blocks: list[Block]) -> list[Block]:
    kept: list[Block] = []
    for block in blocks:
        if block.language != OUTPUT:
            kept.append(block)
            continue
        owner = kept[-1] if kept else None
        if owner is None or owner.language not in RUN or owner.output is not None:
            raise ValueError(f"{block.where}: an output block must follow a python block")
        owner.output = block.source
    return kept


def problems(blocks: list[Block]) -> list[str]:
    """What breaks the conventions: unmarked blocks of other languages, bad syntax."""
    found = []
    for block in blocks:
        if block.language in RUN:
            try:
                compile("\n" * block.line + block.source, block.where, "exec")
            except SyntaxError as error:
                found.append(f"{block.where}: {error}")
        elif block.language not in PROSE and block.skip is None:
            found.append(
                f"{block.where}: a ```{block.language} block runs in no test: make it python, "
                "or mark it with <!-- skip: reason --> on the line before"
            )
    return found


# -- checking printed output --------------------------------------------------------


def _line_matches(pattern: str, line: str) -> bool:
    regex = ".*".join(re.escape(part) for part in pattern.split("..."))
    return re.fullmatch(regex, line) is not None


def _lines_match(want: list[str], got: list[str]) -> bool:
    if not want:
        return not got
    if want[0] == "...":
        return any(_lines_match(want[1:], got[k:]) for k in range(len(got) + 1))
    return bool(got) and _line_matches(want[0], got[0]) and _lines_match(want[1:], got[1:])


def output_matches(expected: str, printed: str) -> bool:
    """``printed`` is ``expected``, up to trailing blanks and the ``...`` wildcards."""
    lines = lambda text: [line.rstrip() for line in text.strip("\n").splitlines()]
    return _lines_match(lines(expected), lines(printed))


# -- running one markdown file's blocks, in a process of their own --------------------


def run_blocks(spec_path: str) -> int:
    """Runs the blocks listed in ``spec_path`` (JSON) in order in one namespace: the
    subprocess's entry point. Returns the exit status."""
    spec = json.loads(pathlib.Path(spec_path).read_text())
    namespace: dict = {"__name__": "__main__"}
    for block in spec:
        if block["skip"] is not None:
            print(f"--- {block['where']}: not run ({block['skip']})", file=sys.stderr)
            continue
        stem = re.sub(r"\W", "_", block["where"].rsplit(":", 1)[0])
        filename = pathlib.Path(f"{stem}_line{block['line']}.py").resolve()
        # Padded so that the file's line numbers are the markdown file's.
        filename.write_text("\n" * block["line"] + block["source"])
        code = compile(filename.read_text(), str(filename), "exec")
        print(f"--- {block['where']}", file=sys.stderr)
        printed = io.StringIO()
        started = time.perf_counter()
        try:
            with contextlib.redirect_stdout(printed):
                exec(code, namespace)
        finally:
            sys.stderr.write(printed.getvalue())  # shown with the failure, if any
            # what each block costs the suite (the slowest file's are worth a look)
            print(f"--- {block['where']}: {time.perf_counter() - started:.1f} s", file=sys.stderr)
        if block["output"] is not None and not output_matches(block["output"], printed.getvalue()):
            print(
                f"{block['where']}: printed\n{printed.getvalue()}\nbut the text shows\n"
                f"{block['output']}",
                file=sys.stderr,
            )
            return 1
    return 0


# -- the tests -------------------------------------------------------------------------


def _runs(path: pathlib.Path) -> bool:
    """Whether ``path`` has a block to run."""
    return any(b.language in RUN and b.skip is None for b in parse(path))


def _run_file(path: pathlib.Path, tmp_path: pathlib.Path) -> None:
    spec = [
        {
            "where": block.where,
            "line": block.line,
            "source": block.source,
            "skip": block.skip,
            "output": block.output,
        }
        for block in parse(path)
        if block.language in RUN
    ]
    spec_path = tmp_path / "blocks.json"
    spec_path.write_text(json.dumps(spec))
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]).rstrip(
        os.pathsep
    )
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    done = subprocess.run(
        [sys.executable, __file__, str(spec_path)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr[-6000:]


@pytest.mark.parametrize("path", DOCS, ids=_name)
def test_every_block_runs_or_says_why_not(path):
    found = problems(parse(path))
    assert not found, "\n".join(found)


@pytest.mark.parametrize("path", [p for p in DOCS if _runs(p)], ids=_name)
def test_examples_run_as_written(path, tmp_path):
    _run_file(path, tmp_path)


def test_the_runner_reads_outputs_skips_and_wildcards(tmp_path):
    page = tmp_path / "page.md"
    page.write_text(
        "```python\nprint(1)\n```\n\n```output\n1\n```\n"
        "<!-- skip: needs a cluster -->\n```bash\nsrun x\n```\n"
        "```bash\nls\n```\n\n<!-- skip: a cluster -->\n\n```py\nx = 1\n```\n"
    )
    blocks = parse(page)
    assert [(b.language, b.line, b.output, b.skip) for b in blocks] == [
        ("python", 1, "1\n", None),
        ("bash", 9, None, "needs a cluster"),
        ("bash", 12, None, None),
        ("py", 18, None, "a cluster"),
    ]
    assert [p.split(":")[:2] for p in problems(blocks)] == [["page.md", "12"]]
    assert output_matches("a ... c\n...\nz", "a b b c\nx\ny\nz\n")
    assert output_matches("(3,) 0.9...", "(3,) 0.9731  \n")
    assert not output_matches("1", "1\n2")
    assert not output_matches("a ... c", "a b d")
    page.write_text("<!-- slow: a minute -->\n```python\nx = 1\n```\n")
    with pytest.raises(ValueError, match="page.md:2: <!-- slow: --> is no mark"):
        parse(page)


def test_a_wrong_output_or_a_failing_block_fails_the_file(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("```python\nx = 2\n```\n\n```py\nprint(x * 3)\n```\n```output\n6\n```\n")
    _run_file(page, tmp_path)  # names carry over from block to block
    page.write_text("```python\nprint(7)\n```\n```output\n6\n```\n")
    with pytest.raises(AssertionError, match="but the text shows"):
        _run_file(page, tmp_path)
    page.write_text("\n\n```python\nimport pcbatch\n1 / 0\n```\n")
    with pytest.raises(AssertionError, match=r"page_md_line3\.py\", line 5"):
        _run_file(page, tmp_path)  # the traceback gives the markdown's line


def test_the_nuts_page_shows_the_signatures_defaults():
    """docs/nuts.md lists every argument of `nuts.sample`; the defaults it shows are the
    signature's, and the arguments without one are the required ones."""
    import ast
    import inspect

    from pcbatch.mcmc import nuts

    (block,) = [b for b in parse(ROOT / "docs" / "nuts.md") if "nuts.sample(\n" in b.source]
    call = next(
        node
        for node in ast.walk(ast.parse(block.source))
        if isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "sample"
    )
    shown = {keyword.arg: keyword.value for keyword in call.keywords}
    parameters = inspect.signature(nuts.sample).parameters
    assert sorted(shown) == sorted(list(parameters)[2:])  # every keyword, in any order
    required = [n for n, p in parameters.items() if p.default is inspect.Parameter.empty]
    assert required == ["target_log_prob_fn", "initial_state", "num_samples", "num_warmup", "seed"]
    for name in list(shown)[list(shown).index("step_size") :]:
        if name != "value_and_grad":
            assert ast.literal_eval(shown[name]) == parameters[name].default, name


if __name__ == "__main__":
    sys.exit(run_blocks(sys.argv[1]))
