#!/usr/bin/env python3
"""Writes fpctl's man pages, in man(7), from one source each:

- the commands themselves (`fpctl --experimental-dump-help`): names, abstracts,
  discussions, arguments, options with their defaults and allowed values;
- man/src/<page>.md: what --help does not carry (OUTPUT, EXIT STATUS, FILES,
  EXAMPLES, more ENVIRONMENT and SEE ALSO), in a small Markdown;
- docs/bundle-format.md and docs/cache-format.md, which become fpctl-bundle(5)
  and fpctl-cache(5) word for word.

Pages are named as git names its own: fpctl-bundle-build(1) for `fpctl bundle build`.
ENVIRONMENT is added from the options a command has (--cache-dir, --api-url).

usage: Scripts/man.py FPCTL [--out DIR]    write DIR/man1 and DIR/man5 (default: man)
       Scripts/man.py FPCTL --check        exit 1, naming them, when committed pages differ
"""
import json
import os
import re
import subprocess
import sys
import textwrap

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SECTION5 = {"fpctl-bundle": "docs/bundle-format.md", "fpctl-cache": "docs/cache-format.md"}
# Order of the sections after OPTIONS, as in git's and curl's pages.
TAIL = ["OUTPUT", "EXIT STATUS", "SIGNALS", "LIMITS", "ENVIRONMENT", "FILES", "EXAMPLES", "SEE ALSO"]

REMOTE_ENV = [
    ("FLOWPILOT_API_KEY", "The API key, when --api-key-file is not given. Sent only in the Authorization header; never printed, logged or cached."),
    ("SSL_CERT_FILE", "A PEM file of CA certificates that replaces the system's store, as in curl and OpenSSL (--cacert adds to it)."),
    ("SSL_CERT_DIR", "A directory of CA certificates that replaces the system's store when SSL_CERT_FILE is unset."),
    ("https_proxy, HTTPS_PROXY", "The http:// proxy for https:// URLs (lowercase first); every request through a proxy is tunnelled with CONNECT."),
    ("http_proxy, HTTP_PROXY", "The http:// proxy for http:// URLs (lowercase first)."),
    ("all_proxy, ALL_PROXY", "The proxy for URLs whose own variable is unset."),
    ("no_proxy, NO_PROXY", "Hosts reached directly: names (matching every name under them), addresses, CIDR blocks, or * for all. Applies to --proxy too."),
]
CACHE_ENV = [("FPCTL_CACHE_DIR", "The cache directory when --cache-dir is not given.")]


def esc(text):
    """Roff-escapes plain text and turns inline Markdown into fonts. Code spans
    are set aside first, so a `*` or `_` in a pattern is never taken for emphasis."""
    text = text.replace("\\", "\\e")
    text = re.sub(r"\[([^\]]+)\]\(([^)]+)\)", r"\1 (\2)", text)
    codes = []

    def keep(m):
        codes.append("\\fB" + m.group(1).replace("-", "\\-") + "\\fR")
        return f"\0{len(codes) - 1}\0"
    text = re.sub(r"`([^`]+)`", keep, text)
    text = re.sub(r"\*\*([^*]+)\*\*", r"\\fB\1\\fR", text)
    text = re.sub(r"(?<![\w*])\*([^*\s][^*]*)\*(?![\w*])", r"\\fI\1\\fR", text)
    return re.sub("\0(\\d+)\0", lambda m: codes[int(m.group(1))], text)


def table_cells(row):
    """A Markdown table row's cells: split at `|`, but not at `\\|`, which is a `|` in the cell."""
    return [c.strip().replace("\\|", "|") for c in re.split(r"(?<!\\)\|", row.strip().strip("|"))]


def line(text):
    """Filled text as input lines of at most 78 bytes (roff fills them again); a
    leading dot or quote would be a request."""
    lines = textwrap.wrap(text, 78, break_long_words=False, break_on_hyphens=False) or [""]
    return "\n".join("\\&" + l if l[:1] in (".", "'") else l for l in lines)


def literal(text):
    """A line of a literal block, as it is."""
    text = text.replace("\\", "\\e")
    return "\\&" + text if text[:1] in (".", "'") else text


def tidy(lines):
    """No paragraph macro right after a section heading: mandoc warns of it."""
    out = []
    for l in lines:
        if l == ".PP" and out and (out[-1].startswith(".SH") or out[-1].startswith(".SS")):
            continue
        out.append(l)
    return out


def markdown(text, base_level=2):
    """A small Markdown (headings, paragraphs, lists, code blocks, tables) to man(7).
    Returns (sections: list of (title, body)); text before any heading goes under ''."""
    sections, title, out = [], "", []
    lines = text.split("\n")
    i = 0

    def flush():
        if out or title:
            sections.append((title, "\n".join(out).strip("\n")))

    while i < len(lines):
        raw = lines[i]
        heading = re.match(r"^(#+) (.*)$", raw)
        if heading:
            level = len(heading.group(1))
            if level <= base_level:
                flush()
                title, out = heading.group(2).strip(), []
            else:
                out.append(".SS " + esc(heading.group(2).strip()))
            i += 1
        elif raw.startswith("```"):
            block = []
            i += 1
            while i < len(lines) and not lines[i].startswith("```"):
                block.append(lines[i])
                i += 1
            i += 1
            out += [".PP", ".RS 4", ".nf"] + [literal(l) for l in block] + [".fi", ".RE"]
        elif raw.startswith("    "):
            block = []
            while i < len(lines) and (lines[i].startswith("    ") or (lines[i] == "" and i + 1 < len(lines) and lines[i + 1].startswith("    "))):
                block.append(lines[i][4:])
                i += 1
            out += [".PP", ".RS 4", ".nf"] + [literal(l) for l in block] + [".fi", ".RE"]
        elif raw.startswith("|"):
            rows = []
            while i < len(lines) and lines[i].startswith("|"):
                cells = table_cells(lines[i])
                if not all(re.fullmatch(r":?-+:?", c) for c in cells):
                    rows.append(cells)
                i += 1
            width = max(len(r) for r in rows)
            out += [".PP", ".TS", "allbox tab(\t);", " ".join(["lb"] * width), " ".join(["l"] * width) + "."]
            for n, r in enumerate(rows):
                cells = [esc(c) if n else esc(c).replace("\\fB", "").replace("\\fR", "") for c in r]
                out.append("\t".join("T{\n" + c + "\nT}" if len(c) > 30 else c for c in cells + [""] * (width - len(r))))
            out.append(".TE")
        elif re.match(r"^\s*([-*]|\d+\.) ", raw):
            items = []
            while i < len(lines) and lines[i].strip() != "" and not lines[i].startswith("#"):
                m = re.match(r"^(\s*)([-*]|\d+\.) (.*)$", lines[i])
                if m:
                    items.append([len(m.group(1)), m.group(2), m.group(3)])
                else:
                    items[-1][2] += " " + lines[i].strip()
                i += 1
                if i < len(lines) and lines[i].strip() == "" and i + 1 < len(lines) and re.match(r"^\s*([-*]|\d+\.) ", lines[i + 1]):
                    i += 1
            term = re.compile(r"^((?:\*\*[^*]+\*\*|`[^`]+`)(?:,? (?:and |or )?(?:\*\*[^*]+\*\*|`[^`]+`))*): (.*)$")
            if all(term.match(body) for _, _, body in items):
                # A definition list: "- **0**: text" or "- `NAME`: text".
                for _, _, body in items:
                    m = term.match(body)
                    out += [".TP", line(esc(m.group(1))), line(esc(m.group(2)))]
                continue
            for indent, mark, body in items:
                bullet = "\\(bu" if mark in "-*" else mark
                out += [".IP %s %d" % (bullet, 4 + indent), line(esc(body))]
        elif raw.strip() == "":
            i += 1
        else:
            para = []
            while i < len(lines) and lines[i].strip() != "" and not re.match(r"^(#|```|\||\s*([-*]|\d+\.) |    )", lines[i]):
                para.append(lines[i].strip())
                i += 1
            # One text, then filled: a code span or emphasis that crosses a line of the source stays whole.
            out += [".PP", line(esc(" ".join(para)))]
    flush()
    return sections


def page_name(path):
    return "-".join(path)


def option_label(arg):
    names = sorted(arg.get("names", []), key=lambda n: n["kind"] != "short")
    flags = ", ".join("\\fB%s\\fR" % (("-" if n["kind"] == "short" else "--") + n["name"]).replace("-", "\\-") for n in names)
    if arg["kind"] == "flag":
        return flags
    return flags + " \\fI" + arg.get("valueName", "value").replace("-", "\\-") + "\\fR"


def synopsis(path, command):
    parts = []
    for arg in command.get("arguments", []):
        names = {n.get("name") for n in arg.get("names", [])}
        if not arg.get("shouldDisplay", True) or names & {"help", "version"}:
            continue
        if arg["kind"] == "positional":
            text = "\\fI" + arg["valueName"].replace("-", "\\-") + "\\fR"
        else:
            text = option_label(arg).split(", ")[-1]
        if arg.get("isRepeating"):
            text += "\\&..."
        parts.append("[" + text + "]" if arg.get("isOptional") or arg["kind"] == "flag" else text)
    if command.get("subcommands"):
        parts.append("\\fIcommand\\fR [\\fIoptions\\fR]")
    return [".PP", ".B " + " ".join(path)] + ([line(" ".join(parts))] if parts else [])


def options(command):
    out = []
    for arg in command.get("arguments", []):
        if not arg.get("shouldDisplay", True):
            continue
        if arg["kind"] == "positional":
            out += [".TP", "\\fI" + arg["valueName"].replace("-", "\\-") + "\\fR" + ("\\&..." if arg.get("isRepeating") else "")]
        else:
            out += [".TP", option_label(arg)]
        out.append(line(esc(arg.get("abstract", ""))))
        values = arg.get("allValueDescriptions")
        if values:
            out += [".RS", ".PP", "Values:"]
            for value in arg.get("allValues", values.keys()):
                out += [".TP", "\\fB%s\\fR" % value.replace("-", "\\-"), line(esc(values[value]))]
            out.append(".RE")
        elif arg.get("allValues"):
            # One value a word, wrapped as prose is (mandoc's style lint: no input line past 80 bytes).
            text = "Values: " + ", ".join("\\fB%s\\fR" % v.replace("-", "\\-") for v in arg["allValues"]) + "."
            out += [".IP"] + textwrap.wrap(text, 78, break_long_words=False, break_on_hyphens=False)
        if "defaultValue" in arg and arg["kind"] != "flag":
            default = arg["defaultValue"]
            out += [".IP", "Default: \\fB%s\\fR." % (default.replace("-", "\\-") if default else "\"\"")]
    return out


def discussion(text):
    """The --help discussion: paragraphs, and lines indented by two spaces as examples."""
    out, para, block = [], [], []
    for raw in (text or "").split("\n") + [""]:
        if raw.startswith("  ") and raw.strip():
            if para:
                out += [".PP"] + [line(esc(p)) for p in para]
                para = []
            block.append(raw[2:])
            continue
        if block:
            out += [".PP", ".RS 4", ".nf"] + [literal(b) for b in block] + [".fi", ".RE"]
            block = []
        if raw.strip():
            para.append(raw.strip())
        elif para:
            out += [".PP"] + [line(esc(p)) for p in para]
            para = []
    return out


def environment(command, extra):
    names = {a.get("names", [{}])[0].get("name") for a in command.get("arguments", []) if a.get("names")}
    entries = (CACHE_ENV if "cache-dir" in names else []) + (REMOTE_ENV if "api-url" in names else [])
    out = []
    for name, text in entries:
        out += [".TP", "\\fB%s\\fR" % name, line(esc(text))]
    if extra:
        out.append(extra)
    return out


def header(name, section, date, version, abstract):
    return [
        '.\\" Generated by Scripts/man.py from the fpctl commands and man/src/%s.md; do not edit.' % name,
        '.TH "%s" "%s" "%s" "fpctl %s" "fpctl Manual"' % (name.upper(), section, date, version),
        # No hyphenation: options, rule names and paths must read as typed (groff split --unrefer-enced).
        ".nh",
        ".SH NAME",
        line("%s \\- %s" % (name, esc(abstract))),
    ]


def command_page(path, command, date, version, parent):
    name = page_name(path)
    src = os.path.join(ROOT, "man", "src", name + ".md")
    extra = dict(markdown(open(src).read())) if os.path.exists(src) else {}
    unknown = set(extra) - set(TAIL) - {""}
    if unknown:
        sys.exit("man/src/%s.md: unknown sections %s (use %s)" % (name, sorted(unknown), ", ".join(TAIL)))
    out = header(name, "1", date, version, command.get("abstract", ""))
    out += [".SH SYNOPSIS"] + synopsis(path, command)
    out += [".SH DESCRIPTION"] + (discussion(command.get("discussion")) or [".PP", line(esc(command.get("abstract", "")) + ".")])
    if extra.get(""):
        out.append(extra[""])
    subs = [s for s in command.get("subcommands", []) if s.get("shouldDisplay", True) and s["commandName"] != "help"]
    if subs:
        out.append(".SH COMMANDS")
        for sub in subs:
            out += [".TP", "\\fB%s\\fR(1)" % page_name(path + [sub["commandName"]]), line(esc(sub.get("abstract", "")))]
    opts = options(command)
    if opts:
        out += [".SH OPTIONS"] + opts
    for title in TAIL:
        body = extra.get(title)
        if title == "ENVIRONMENT":
            env = environment(command, body)
            if env:
                out += [".SH ENVIRONMENT"] + env
            continue
        if title == "SEE ALSO":
            seen = ["fpctl(1)"] if parent else []
            if parent and len(path) > 2:
                seen.append("%s(1)" % page_name(path[:-1]))
            seen += ["%s(1)" % page_name(path + [s["commandName"]]) for s in subs]
            more = re.findall(r"[\w.-]+\(\d\)", body or "")
            all_refs = [r for r in dict.fromkeys(seen + more) if r != "%s(1)" % name]
            refs = sorted(all_refs, key=lambda r: (r[-2], r))
            if refs:
                out += [".SH SEE ALSO", ",\n".join("\\fB%s\\fR(%s)" % (r[:-3], r[-2]) for r in refs)]
            continue
        if body:
            out += [".SH " + title, body]
    return name, "\n".join(tidy("\n".join(out).split("\n"))) + "\n"


def section5_page(name, doc, date, version):
    sections = markdown(open(os.path.join(ROOT, doc)).read(), base_level=2)
    title = open(os.path.join(ROOT, doc)).readline().lstrip("# ").strip()
    out = header(name, "5", date, version, title)
    out.append('.\\" The text is %s, word for word.' % doc)
    for heading, body in sections:
        if heading == title:
            out += [".SH DESCRIPTION", body]
        else:
            out += [".SH " + esc(heading).upper(), body]
    out += [".SH SEE ALSO", "\\fBfpctl\\fR(1),", "\\fB%s\\fR(5)" % ("fpctl-cache" if name == "fpctl-bundle" else "fpctl-bundle")]
    return name, "\n".join(tidy("\n".join(out).split("\n"))) + "\n"


def generate(fpctl):
    dump = json.loads(subprocess.run([fpctl, "--experimental-dump-help"], check=True, capture_output=True).stdout)
    version = subprocess.run([fpctl, "--version"], check=True, capture_output=True, text=True).stdout.strip()
    date = open(os.path.join(ROOT, "man", "DATE")).read().strip()
    pages = {}

    def walk(command, path, parent):
        if command["commandName"] == "help":
            return
        name, text = command_page(path, command, date, version, parent)
        pages["man1/%s.1" % name] = text
        for sub in command.get("subcommands", []):
            walk(sub, path + [sub["commandName"]], command)

    walk(dump["command"], ["fpctl"], None)
    for name, doc in SECTION5.items():
        page, text = section5_page(name, doc, date, version)
        pages["man5/%s.5" % page] = text
    return pages


def main():
    args = sys.argv[1:]
    if not args:
        sys.exit(__doc__)
    fpctl, check = args[0], "--check" in args
    out = args[args.index("--out") + 1] if "--out" in args else os.path.join(ROOT, "man")
    pages = generate(fpctl)
    if check:
        stale = []
        for rel, text in pages.items():
            path = os.path.join(out, rel)
            if not os.path.exists(path) or open(path).read() != text:
                stale.append(rel)
        for folder in ("man1", "man5"):
            for f in sorted(os.listdir(os.path.join(out, folder))) if os.path.isdir(os.path.join(out, folder)) else []:
                if "%s/%s" % (folder, f) not in pages:
                    stale.append("%s/%s (no longer generated)" % (folder, f))
        if stale:
            print("man pages are stale (run Scripts/update-man.sh): " + ", ".join(stale), file=sys.stderr)
            sys.exit(1)
        return
    for folder in ("man1", "man5"):
        os.makedirs(os.path.join(out, folder), exist_ok=True)
        for f in os.listdir(os.path.join(out, folder)):
            os.remove(os.path.join(out, folder, f))
    for rel, text in pages.items():
        with open(os.path.join(out, rel), "w") as f:
            f.write(text)
    print("%s: %d pages" % (out, len(pages)))


if __name__ == "__main__":
    main()
