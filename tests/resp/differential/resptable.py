"""Shared code for the RESP differential table (record.py, run.py).

A case file is a list of lines:

  # comment            (a line starting with '#', except the RESP3 booleans '#t'/'#f'
                        when they stand where a reply is expected)
  <blank>              ignored
  @anchor-setup CMD    run on the anchor (after FLUSHALL) before the file's cases
  @pollen-setup CMD    run on pollend only (by run.py) before the file's cases: a Pollen
                       setting that the anchor has by nature (e.g. resp3-replies redis-8)
  > CMD ARGS...        a case: the command, split like redis-cli splits a line
  <reply lines>        the expected reply: exactly one RESP value, one CRLF-terminated
                       element per line (CRLF removed), bulk payloads on their own line,
                       bytes outside printable ASCII written \\xNN and the backslash \\\\;
                       a line '...' matches any one complete RESP value.

Only the standard library is used, so replies are compared byte for byte.
"""

import socket

# ---------------------------------------------------------------------------
# Values
#
# A RESP value is a Value(kind, head, payload, children):
#   kind      the type byte as a one-character str ('+', '-', ':', '$', '*', ...)
#   head      the bytes after the type byte up to CRLF
#   payload   bytes for the bulk-like types ('$', '!', '=') unless null, else None
#   children  list of Value for the aggregate types, else None
# Two Values are equal exactly when their wire bytes are equal.
# WILDCARD stands for the '...' line.

BULK_KINDS = "$!="          # bulk string, blob error, verbatim string
AGG_KINDS = "*%~>|"         # array, map, set, push, attribute
LINE_KINDS = "+-:_,#("      # simple string, error, integer, null, double, boolean, big number
ALL_KINDS = BULK_KINDS + AGG_KINDS + LINE_KINDS


class Value:
    __slots__ = ("kind", "head", "payload", "children")

    def __init__(self, kind, head, payload=None, children=None):
        self.kind = kind
        self.head = head
        self.payload = payload
        self.children = children

    def __eq__(self, other):
        if not isinstance(other, Value):
            return NotImplemented
        return (self.kind == other.kind and self.head == other.head
                and self.payload == other.payload and self.children == other.children)

    def __repr__(self):
        return "Value(%r)" % (render_lines(self),)

    def wire(self):
        out = bytearray()
        _wire(self, out)
        return bytes(out)


class _Wildcard:
    def __repr__(self):
        return "WILDCARD"


WILDCARD = _Wildcard()


def _wire(v, out):
    out += v.kind.encode() + v.head + b"\r\n"
    if v.payload is not None:
        out += v.payload + b"\r\n"
    if v.children is not None:
        for c in v.children:
            _wire(c, out)


def _child_count(kind, head):
    """Number of child values an aggregate header announces (-1 for a null aggregate)."""
    n = int(head)
    if n < 0:
        return -1
    if kind in "%|":
        n *= 2
    if kind == "|":
        n += 1      # an attribute is followed by the value it describes
    return n


# ---------------------------------------------------------------------------
# Escaping of reply lines

def escape(data):
    """bytes -> str: printable ASCII as is, '\\' as '\\\\', anything else as \\xNN."""
    parts = []
    for b in data:
        if b == 0x5C:
            parts.append("\\\\")
        elif 0x20 <= b <= 0x7E:
            parts.append(chr(b))
        else:
            parts.append("\\x%02x" % b)
    return "".join(parts)


def unescape(text, where="line"):
    """The inverse of escape(); raises FormatError on anything else after a backslash."""
    out = bytearray()
    i = 0
    n = len(text)
    while i < n:
        ch = text[i]
        if ch == "\\":
            if i + 1 < n and text[i + 1] == "\\":
                out.append(0x5C)
                i += 2
                continue
            if i + 3 < n and text[i + 1] == "x" and _is_hex(text[i + 2:i + 4]):
                out.append(int(text[i + 2:i + 4], 16))
                i += 4
                continue
            raise FormatError("bad escape in %s: %r" % (where, text))
        o = ord(ch)
        if o > 0x7E or o < 0x20:
            raise FormatError("non-printable character in %s: %r" % (where, text))
        out.append(o)
        i += 1
    return bytes(out)


def _is_hex(s):
    return len(s) == 2 and all(c in "0123456789abcdefABCDEF" for c in s)


# ---------------------------------------------------------------------------
# Rendering and parsing reply lines

def render_lines(v):
    """A Value (or WILDCARD) -> list of str lines."""
    out = []
    _render(v, out)
    return out


def _render(v, out):
    if v is WILDCARD:
        out.append("...")
        return
    out.append(v.kind + escape(v.head))
    if v.payload is not None:
        out.append(escape(v.payload))
    if v.children is not None:
        for c in v.children:
            _render(c, out)


class FormatError(Exception):
    pass


def parse_value_lines(lines, pos, where):
    """Parse one value from lines[pos:]; returns (Value or WILDCARD, next pos)."""
    if pos >= len(lines):
        raise FormatError("%s: reply ends early" % where)
    line = lines[pos]
    if line == "...":
        return WILDCARD, pos + 1
    if line.startswith("> "):
        raise FormatError("%s: reply ends early (line %d starts a case)" % (where, pos + 1))
    if not line or line[0] not in ALL_KINDS:
        raise FormatError("%s: not a RESP element: %r" % (where, line))
    kind = line[0]
    head = unescape(line[1:], where)
    pos += 1
    if kind in BULK_KINDS:
        n = _int_head(head, where)
        if n < 0:
            return Value(kind, head), pos
        if pos >= len(lines):
            raise FormatError("%s: bulk payload missing" % where)
        payload = unescape(lines[pos], where)
        if len(payload) != n:
            raise FormatError("%s: bulk length %d but payload has %d bytes: %r"
                              % (where, n, len(payload), lines[pos]))
        return Value(kind, head, payload=payload), pos + 1
    if kind in AGG_KINDS:
        _int_head(head, where)
        n = _child_count(kind, head)
        if n < 0:
            return Value(kind, head), pos
        children = []
        for _ in range(n):
            c, pos = parse_value_lines(lines, pos, where)
            children.append(c)
        return Value(kind, head, children=children), pos
    if kind == ":":
        _int_head(head, where)
    return Value(kind, head), pos


def _int_head(head, where):
    try:
        return int(head)
    except ValueError:
        raise FormatError("%s: bad length %r" % (where, head))


def matches(expected, actual):
    """expected may contain WILDCARDs; actual is a Value."""
    if expected is WILDCARD:
        return True
    if (expected.kind != actual.kind or expected.head != actual.head
            or expected.payload != actual.payload):
        return False
    if expected.children is None or actual.children is None:
        return expected.children is None and actual.children is None
    if len(expected.children) != len(actual.children):
        return False
    return all(matches(e, a) for e, a in zip(expected.children, actual.children))


def merge_wildcards(template, actual):
    """What record.py writes: `actual`, except where `template` has '...' at the
    same position (same shape of aggregates on the way down) it stays '...'."""
    if template is None:
        return actual
    if template is WILDCARD:
        return WILDCARD
    if (template.children is not None and actual.children is not None
            and template.kind == actual.kind and template.head == actual.head):
        kids = [merge_wildcards(t, a) for t, a in zip(template.children, actual.children)]
        return Value(actual.kind, actual.head, actual.payload, kids)
    return actual


# ---------------------------------------------------------------------------
# Command lines (split like redis-cli's sdssplitargs)

def split_command(line):
    args = []
    i = 0
    n = len(line)
    while True:
        while i < n and line[i] in " \t\n\r\v\f":
            i += 1
        if i >= n:
            return args
        cur = bytearray()
        inq = False     # inside "double quotes"
        insq = False    # inside 'single quotes'
        while True:
            if inq:
                if i >= n:
                    raise FormatError("unbalanced quotes: %r" % line)
                c = line[i]
                if c == "\\" and i + 3 < n and line[i + 1] == "x" and _is_hex(line[i + 2:i + 4]):
                    cur.append(int(line[i + 2:i + 4], 16))
                    i += 3
                elif c == "\\" and i + 1 < n:
                    i += 1
                    e = line[i]
                    cur += {"n": b"\n", "r": b"\r", "t": b"\t", "b": b"\b",
                            "a": b"\a"}.get(e, e.encode("utf-8"))
                elif c == '"':
                    if i + 1 < n and line[i + 1] not in " \t\n\r\v\f":
                        raise FormatError("closing quote must be followed by a space: %r" % line)
                    i += 1
                    break
                else:
                    cur += c.encode("utf-8")
            elif insq:
                if i >= n:
                    raise FormatError("unbalanced quotes: %r" % line)
                c = line[i]
                if c == "\\" and i + 1 < n and line[i + 1] == "'":
                    i += 1
                    cur.append(0x27)
                elif c == "'":
                    if i + 1 < n and line[i + 1] not in " \t\n\r\v\f":
                        raise FormatError("closing quote must be followed by a space: %r" % line)
                    i += 1
                    break
                else:
                    cur += c.encode("utf-8")
            else:
                if i >= n:
                    break
                c = line[i]
                if c in " \t\n\r\v\f":
                    break
                if c == '"':
                    inq = True
                elif c == "'":
                    insq = True
                else:
                    cur += c.encode("utf-8")
            i += 1
        args.append(bytes(cur))


def encode_command(args):
    out = bytearray(b"*%d\r\n" % len(args))
    for a in args:
        out += b"$%d\r\n" % len(a) + a + b"\r\n"
    return bytes(out)


# ---------------------------------------------------------------------------
# Case files

class Case:
    __slots__ = ("line_no", "command", "args", "expected", "expected_text")

    def __init__(self, line_no, command, args, expected, expected_text):
        self.line_no = line_no          # 1-based line of the '>' line
        self.command = command          # the text after '> '
        self.args = args                # list of bytes
        self.expected = expected        # Value, WILDCARD or None (not recorded yet)
        self.expected_text = expected_text  # the reply lines as written


class CaseFile:
    """items: list of str (a line kept as is) or Case, in file order."""

    def __init__(self, path, items):
        self.path = path
        self.items = items

    @property
    def cases(self):
        return [it for it in self.items if isinstance(it, Case)]

    def _directive(self, name):
        return [split_command(it[len(name):]) for it in self.items
                if isinstance(it, str) and it.startswith(name + " ")]

    @property
    def anchor_setup(self):
        return self._directive("@anchor-setup")

    @property
    def pollen_setup(self):
        return self._directive("@pollen-setup")

    def to_text(self):
        out = []
        for it in self.items:
            if isinstance(it, Case):
                out.append("> " + it.command)
                out.extend(it.expected_text)
            else:
                out.append(it)
        return "\n".join(out) + "\n"


def _is_comment(line):
    return line.startswith("#")


def load_case_file(path, allow_unrecorded=False):
    with open(path, "rb") as f:
        raw = f.read()
    try:
        text = raw.decode("ascii")
    except UnicodeDecodeError:
        raise FormatError("%s: the file must be ASCII (write other bytes as \\xNN)" % path)
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    lines = [ln[:-1] if ln.endswith("\r") else ln for ln in lines]
    items = []
    i = 0
    while i < len(lines):
        line = lines[i]
        where = "%s:%d" % (path, i + 1)
        if line.startswith(">"):
            if not line.startswith("> "):
                raise FormatError("%s: a case line starts with '> '" % where)
            command = line[2:]
            args = split_command(command)
            if not args:
                raise FormatError("%s: empty command" % where)
            j = i + 1
            nxt = lines[j] if j < len(lines) else None
            if (nxt is None or nxt == "" or nxt.startswith("> ") or nxt.startswith("@")
                    or (_is_comment(nxt) and nxt not in ("#t", "#f"))):
                if not allow_unrecorded:
                    raise FormatError("%s: case has no expected reply (run record.py)" % where)
                items.append(Case(i + 1, command, args, None, []))
                i = j
                continue
            value, j = parse_value_lines(lines, j, where)
            items.append(Case(i + 1, command, args, value, lines[i + 1:j]))
            i = j
            continue
        if line == "" or _is_comment(line) or line.startswith("@"):
            if line.startswith("@") and not line.startswith(("@anchor-setup ", "@pollen-setup ")):
                raise FormatError("%s: unknown directive %r" % (where, line))
            items.append(line)
            i += 1
            continue
        raise FormatError("%s: reply line outside a case (one value per case): %r" % (where, line))
    return CaseFile(path, items)


# ---------------------------------------------------------------------------
# A RESP connection

class ConnectionLost(Exception):
    pass


class Connection:
    def __init__(self, host, port, timeout=10.0):
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.sock.settimeout(timeout)
        self.buf = bytearray()

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass

    def send(self, args):
        try:
            self.sock.sendall(encode_command(args))
        except OSError as e:
            raise ConnectionLost("send failed: %s" % e)

    def call(self, args):
        self.send(args)
        return self.read_value()

    def _fill(self):
        try:
            data = self.sock.recv(65536)
        except socket.timeout:
            raise ConnectionLost("timed out waiting for a reply")
        except OSError as e:
            raise ConnectionLost("receive failed: %s" % e)
        if not data:
            raise ConnectionLost("connection closed by the server")
        self.buf += data

    def _line(self):
        while True:
            k = self.buf.find(b"\r\n")
            if k >= 0:
                line = bytes(self.buf[:k])
                del self.buf[:k + 2]
                return line
            self._fill()

    def _exact(self, n):
        while len(self.buf) < n + 2:
            self._fill()
        data = bytes(self.buf[:n])
        if self.buf[n:n + 2] != b"\r\n":
            raise ConnectionLost("protocol error: bulk payload not followed by CRLF")
        del self.buf[:n + 2]
        return data

    def read_value(self):
        line = self._line()
        if not line:
            raise ConnectionLost("protocol error: empty line")
        kind = chr(line[0])
        head = line[1:]
        if kind not in ALL_KINDS:
            raise ConnectionLost("protocol error: unknown type byte %r" % line[:1])
        if kind in BULK_KINDS:
            n = int(head)
            if n < 0:
                return Value(kind, head)
            return Value(kind, head, payload=self._exact(n))
        if kind in AGG_KINDS:
            n = _child_count(kind, head)
            if n < 0:
                return Value(kind, head)
            return Value(kind, head, children=[self.read_value() for _ in range(n)])
        return Value(kind, head)
