"""The documentation stays in its place: a small README, links that resolve, no build diary.

- README.md is a product page: under 25 KB (depth lives in docs/, figures in
  benchmarks/RESULTS.md and benchmarks/HISTORY.md).
- Every relative link of README.md, CHANGELOG.md, docs/*.md,
  benchmarks/*.md and benchmarks/experiments/*.md points to a file that
  exists, and a `#fragment` to a heading of that file (GitHub's heading
  anchors).
- No project file speaks of the project's own history of work (numbered
  stops or issues, unfinished work, deadlines): measurements are keyed by
  date and commit in benchmarks/HISTORY.md instead.
"""

import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
README_MAX_BYTES = 25_000
LINKED_PAGES = ["README.md", "CHANGELOG.md", "docs/*.md", "benchmarks/*.md", "benchmarks/experiments/*.md"]
SCANNED = ["README.md", "CHANGELOG.md", "docs", "benchmarks", "sbert_keras", "notebooks", "tests"]
TEXT_SUFFIXES = {".md", ".py", ".txt", ".toml", ".json", ".ipynb", ".csv", ".cfg"}
# Pages that another change adds: a link to one is accepted while the page is
# missing, and checked like any other link once the page exists.
PENDING_PAGES = set()
# Written with \s+ so that this file does not match itself.
DIARY = re.compile(
    r"\bstops?\s+[0-9]|\bissues?\s+[0-9]|\bwork\s+in\s+progress\b|\bthis\s+session\b"
    r"|\b(?:this|the)\s+(?:stop's\s+)?deadline\b",
    re.IGNORECASE,
)
LINK = re.compile(r"(?<!\!)\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
FENCED = re.compile(r"^(```|~~~).*?^\1[ \t]*$", re.DOTALL | re.MULTILINE)
HEADING = re.compile(r"^#{1,6}[ \t]+(.+?)[ \t]*#*[ \t]*$", re.MULTILINE)


def without_code_blocks(text):
    return FENCED.sub("", text)


def anchors(markdown):
    """GitHub's anchors of a Markdown text's headings: lower case, punctuation dropped, spaces to hyphens."""
    found, seen = set(), {}
    for title in HEADING.findall(without_code_blocks(markdown)):
        slug = re.sub(r"[^\w\- ]", "", title.lower()).replace(" ", "-")
        n = seen.get(slug, 0)
        seen[slug] = n + 1
        found.add(slug if n == 0 else f"{slug}-{n}")
    return found


def broken_links(page, root=ROOT, pending=frozenset()):
    """`"page: target (why)"` for each relative link of `page` that does not resolve."""
    text = page.read_text(encoding="utf-8")
    broken = []
    for target in LINK.findall(without_code_blocks(text)):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.IGNORECASE):  # https:, mailto:, ...
            continue
        path, _, fragment = target.partition("#")
        linked = (page.parent / path).resolve() if path else page
        shown = f"{page.relative_to(root).as_posix()}: {target}"
        if not linked.exists():
            relative = linked.relative_to(root).as_posix() if linked.is_relative_to(root) else str(linked)
            if relative not in pending:
                broken.append(f"{shown} (no such file)")
            continue
        if fragment and linked.suffix == ".md" and fragment not in anchors(linked.read_text(encoding="utf-8")):
            broken.append(f"{shown} (no heading with anchor #{fragment})")
    return broken


def diary_lines(paths, root=ROOT):
    """`"file:line: text"` for every line of `paths` that speaks of the project's history of work."""
    found = []
    for path in paths:
        for number, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
            if DIARY.search(line):
                found.append(f"{path.relative_to(root).as_posix()}:{number}: {line.strip()[:120]}")
    return found


def scanned_files():
    for name in SCANNED:
        path = ROOT / name
        candidates = [path] if path.is_file() else sorted(path.rglob("*")) if path.is_dir() else []
        for file in candidates:
            if file.is_file() and file.suffix in TEXT_SUFFIXES and "__pycache__" not in file.parts:
                yield file


def test_readme_is_a_product_page():
    size = README.stat().st_size
    assert size < README_MAX_BYTES, f"README.md is {size} bytes (limit {README_MAX_BYTES}): move depth to docs/"


def test_every_relative_link_resolves():
    pages = sorted({page for pattern in LINKED_PAGES for page in ROOT.glob(pattern)})
    assert README in pages and len(pages) > 5
    broken = [link for page in pages for link in broken_links(page, pending=PENDING_PAGES)]
    assert not broken, "broken links: " + "; ".join(broken)


def test_no_file_speaks_of_the_projects_history_of_work():
    files = list(scanned_files())
    assert any(f.suffix == ".py" for f in files) and any(f.suffix == ".md" for f in files)
    found = diary_lines(files)
    assert not found, "key such notes by date and commit in benchmarks/HISTORY.md instead: " + "; ".join(found)


def test_the_checks_name_what_they_find(tmp_path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "a.md").write_text("# Title\n\n## Why `faiss`, not ScaNN?\n", encoding="utf-8")
    page = tmp_path / "README.md"
    page.write_text(
        "[ok](docs/a.md) [ok](docs/a.md#why-faiss-not-scann) [web](https://example.com/x)\n"
        "[gone](docs/b.md) [anchor](docs/a.md#nowhere) [later](docs/c.md)\n"
        "```\n[in code](nowhere.md)\n```\n",
        encoding="utf-8",
    )
    assert broken_links(page, root=tmp_path, pending={"docs/c.md"}) == [
        "README.md: docs/b.md (no such file)",
        "README.md: docs/a.md#nowhere (no heading with anchor #nowhere)",
    ]
    notes = tmp_path / "notes.md"
    step, ticket, wip = "St" + "op 12", "iss" + "ue 3", "work " + "in progress"
    notes.write_text(f"fine\nmeasured in {step}\nsee {ticket}\n{wip}\nthe dead" + "line passed\n", encoding="utf-8")
    assert [line.split(":")[1] for line in diary_lines([notes], root=tmp_path)] == ["2", "3", "4", "5"]
