#!/usr/bin/env python3
"""Fails when a test sleeps to wait for something instead of polling for it.

Every `usleep(`, `sleep(` and `Task.sleep(` in Tests/**/*.swift must be part of
a poll, which waits for a condition with a deadline: on a line that is itself a
`while` loop, or inside a `while` or `repeat` block (one of the two blocks that
enclose it, so an `if` inside a poll counts); or carry a comment on its line or
the line before saying `time is what is tested`, for the few tests whose subject
is time itself. (CONTRIBUTING.md, "Tests that force".)

    Scripts/sleep-lint.py [DIR]     prints each offending FILE:LINE and exits 1
"""
import pathlib
import re
import sys

SLEEP = re.compile(r"\b(usleep|sleep|Task\.sleep)\(")
LOOP = re.compile(r"\b(while|repeat)\b")
EXEMPT = "time is what is tested"


def code(line: str) -> str:
    return line.split("//", 1)[0].rstrip()


def indentation(line: str) -> int:
    return len(line) - len(line.lstrip(" "))


def opener(lines: list[str], index: int) -> str:
    """The statement that opens the block whose `{` is on line `index`: its
    lines back to the one that starts it (a condition may span up to 4 lines,
    each earlier one not closing a statement or a block)."""
    text = code(lines[index])
    for above in range(index - 1, max(-1, index - 5), -1):
        earlier = code(lines[above])
        if not earlier or earlier.endswith(("{", "}")):
            break
        text = earlier + " " + text
    return text


def enclosing_blocks(lines: list[str], index: int, levels: int = 2) -> list[str]:
    """The statements opening the `levels` innermost blocks around line `index`."""
    found = []
    depth = indentation(lines[index])
    for above in range(index - 1, -1, -1):
        text = code(lines[above])
        if text and text.endswith("{") and indentation(lines[above]) < depth:
            found.append(opener(lines, above))
            depth = indentation(lines[above])
            if len(found) == levels:
                break
    return found


def offending(lines: list[str]) -> list[int]:
    found = []
    for index, line in enumerate(lines):
        match = SLEEP.search(code(line))
        # A sleep in a string literal (a test of this lint) is not a call.
        if not match or code(line)[: match.start()].count('"') % 2 == 1:
            continue
        if EXEMPT in line.lower() or (index > 0 and EXEMPT in lines[index - 1].lower()):
            continue
        if LOOP.search(code(line)) or any(LOOP.search(block) for block in enclosing_blocks(lines, index)):
            continue
        found.append(index + 1)
    return found


def main() -> int:
    root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else "Tests")
    bad = []
    for path in sorted(root.rglob("*.swift")):
        lines = path.read_text(encoding="utf-8").split("\n")
        bad += [f"{path}:{n}: {lines[n - 1].strip()}" for n in offending(lines)]
    if bad:
        print("a test sleeps without polling for a condition "
              "(poll with a deadline, or say why time is what is tested):", file=sys.stderr)
        print("\n".join(bad), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
