#!/usr/bin/env python3
"""README.md and docs/ point only at what exists. Reads README.md and every Markdown file under
docs/ and fails on:
- a relative link or image, [text](target) or ![alt](target) (also <img src="..."> and
  reference definitions "[label]: target"), whose file does not exist; http(s):, mailto: and
  other URLs with a scheme are not checked;
- a #anchor, alone or after a Markdown file, that is no heading of that page (GitHub's slug:
  lowercase, punctuation other than - and _ dropped, each space a -, repeats numbered -1, -2);
- a repository path named in backticks that looks like a source file (say
  `tests/app/cli/cli_test.cpp` or `scripts/demo.sh`) and does not exist. Such a token contains a
  '/', ends in .cpp, .h, .py, .sh, .md or .json, does not start with build/ or / and holds no '<'
  or '*'; and its first folder is a top-level entry of the repository, so placeholders such as
  DIR/rank-R.json or results/x.json are left alone.
Fenced code blocks are skipped.

Usage: docs_links_check.py SOURCE_DIR   (exit 0 when every link holds, 1 with one line per dead
link, naming the file and the target; the last line says how many were checked)"""
import os
import re
import sys
import urllib.parse

LINK = re.compile(r'\]\(\s*<?([^)\s>]+)>?(?:\s+(?:"[^"]*"|\'[^\']*\'|\([^)]*\)))?\s*\)')
REFERENCE = re.compile(r'^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+.*)?$')
IMG_TAG = re.compile(r'<img\b[^>]*\bsrc\s*=\s*["\']([^"\']+)["\']', re.I)
HTML_ANCHOR = re.compile(r'<a\b[^>]*\b(?:name|id)\s*=\s*["\']([^"\']+)["\']', re.I)
SCHEME = re.compile(r'^[A-Za-z][A-Za-z0-9+.-]*:')
FENCE = re.compile(r'^\s{0,3}(`{3,}|~{3,})')
HEADING = re.compile(r'^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$')
SETEXT = re.compile(r'^\s{0,3}(=+|-+)\s*$')
CODE_SPAN = re.compile(r'(`+)(.+?)\1')
SOURCE_SUFFIXES = (".cpp", ".h", ".py", ".sh", ".md", ".json")


def prose_lines(text):
    """(line number, line) for every line outside fenced code blocks."""
    fence = None
    for number, line in enumerate(text.split("\n"), 1):
        m = FENCE.match(line)
        if fence is None:
            if m:
                fence = m.group(1)[0] * len(m.group(1))
                continue
            yield number, line
        elif m and m.group(1).startswith(fence):
            fence = None


def slug(heading):
    """GitHub's anchor for a heading's text."""
    text = re.sub(r'!?\[([^\]]*)\]\([^)]*\)', r'\1', heading)  # links and images: their text
    text = re.sub(r'<[^>]+>', '', text)  # inline HTML
    text = text.replace('`', '').strip().lower()
    text = re.sub(r'[^\w\- ]', '', text)  # \w keeps letters, digits and _ of every script
    return text.replace(' ', '-')


def anchors_of(path, cache={}):
    if path not in cache:
        found, seen = set(), {}
        text = open(path, encoding="utf-8").read()
        previous = None
        for _, line in prose_lines(text):
            title = None
            m = HEADING.match(line)
            if m:
                title = m.group(2)
            elif previous and previous.strip() and SETEXT.match(line) and not HEADING.match(previous):
                title = previous.strip()
            if title is not None:
                base = slug(title)
                n = seen.get(base, 0)
                seen[base] = n + 1
                found.add(base if n == 0 else f"{base}-{n}")
            for name in HTML_ANCHOR.findall(line):
                found.add(name)
            previous = line
        cache[path] = found
    return cache[path]


def check_target(root, page, target):
    """None when `target`, written in `page`, exists; else why not."""
    if SCHEME.match(target) or target.startswith("//"):
        return None  # a URL: not ours to check
    path_part, _, anchor = target.partition("#")
    path_part = urllib.parse.unquote(path_part.split("?", 1)[0])
    if path_part:
        base = root if path_part.startswith("/") else os.path.dirname(page)
        resolved = os.path.normpath(os.path.join(base, path_part.lstrip("/")))
        if not os.path.exists(resolved):
            return "no such file"
    else:
        resolved = page
    if anchor and os.path.isfile(resolved) and resolved.endswith(".md"):
        if urllib.parse.unquote(anchor).lower() not in anchors_of(resolved):
            return f"no heading #{anchor} in {os.path.relpath(resolved, root)}"
    return None


def source_paths(line):
    """Tokens in the line's code spans that name a repository source file."""
    for m in CODE_SPAN.finditer(line):
        for token in m.group(2).split():
            token = token.strip(".,;:()[]'\"")
            if ("/" in token and token.endswith(SOURCE_SUFFIXES)
                    and not token.startswith(("build/", "/")) and "<" not in token
                    and "*" not in token):
                yield token


def main():
    if len(sys.argv) != 2:
        print(__doc__.strip().split("\n\n")[-1], file=sys.stderr)
        return 2
    root = os.path.abspath(sys.argv[1])
    pages = [os.path.join(root, "README.md")]
    for folder, _, names in sorted(os.walk(os.path.join(root, "docs"))):
        pages += [os.path.join(folder, n) for n in sorted(names) if n.endswith(".md")]
    top_level = set(os.listdir(root))
    checked, dead = 0, []
    for page in pages:
        if not os.path.isfile(page):
            dead.append(f"{os.path.relpath(page, root)}: missing")
            continue
        shown = os.path.relpath(page, root)
        for number, line in prose_lines(open(page, encoding="utf-8").read()):
            for token in source_paths(line):
                if token.split("/", 1)[0] not in top_level:
                    continue
                checked += 1
                if not os.path.exists(os.path.join(root, token)):
                    dead.append(f"{shown}:{number}: `{token}`: no such file")
            prose = CODE_SPAN.sub("", line)
            targets = LINK.findall(prose) + IMG_TAG.findall(prose)
            m = REFERENCE.match(prose)
            if m:
                targets.append(m.group(1))
            for target in targets:
                if SCHEME.match(target):
                    continue
                checked += 1
                why = check_target(root, page, target)
                if why:
                    dead.append(f"{shown}:{number}: ({target}): {why}")
    for line in dead:
        print(line)
    print(f"{checked} links checked, {len(dead)} dead")
    return 1 if dead else 0


if __name__ == "__main__":
    sys.exit(main())
