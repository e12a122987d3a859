"""The code examples of docs/policy.md run and print what the page says they print."""

import contextlib
import io
import re
from pathlib import Path

ROOT = Path(__file__).parent.parent.parent


def test_policy_examples_run_and_print_what_the_page_says(monkeypatch):
    page = (ROOT / "docs" / "policy.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", page, re.S)
    assert blocks, "docs/policy.md lost its example"
    monkeypatch.chdir(ROOT)
    for block in blocks:
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            exec(compile(block, "docs/policy.md", "exec"), {})
        flat = " ".join(page.split())
        for line in out.getvalue().splitlines():
            assert f"`{line}`" in flat or line in flat, f"docs/policy.md does not show: {line}"
