"""Chakra execution-trace messages, built with the ``protobuf`` package from the vendored
definition ``chakra_et_def.proto`` (MLCommons Chakra's ``et_def.proto``, Apache-2.0; see the
header of that file), and the file framing of Chakra's own reader and writer.

No generated module is kept: the definition is turned into a ``FileDescriptorProto`` by
:func:`file_descriptor` (the proto3 subset the file uses: ``syntax``, ``package``, messages with
singular, ``repeated`` and ``oneof`` fields, enums) and the message classes come from a private
descriptor pool, so the module works with any protobuf runtime that has
``message_factory.GetMessageClass`` and cannot clash with another copy of ``et_def.proto`` in the
default pool.

**Framing** (Chakra ``src/third_party/utils/protolib.py``, ``encodeMessage`` / ``decodeMessage``):
an ET file is a sequence of messages, each preceded by its length as a varint; the first is a
``GlobalMetadata``, every later one a ``Node``. A file may be gzip-compressed (Chakra's reader
opens either).
"""

from __future__ import annotations

import gzip
import re
from functools import lru_cache
from pathlib import Path

__all__ = ["PROTO_PATH", "file_descriptor", "messages", "split_messages", "encode_messages"]

PROTO_PATH = Path(__file__).with_name("chakra_et_def.proto")

_SCALARS = {"double": "TYPE_DOUBLE", "float": "TYPE_FLOAT", "int32": "TYPE_INT32", "int64": "TYPE_INT64",
            "uint32": "TYPE_UINT32", "uint64": "TYPE_UINT64", "sint32": "TYPE_SINT32", "sint64": "TYPE_SINT64",
            "fixed32": "TYPE_FIXED32", "fixed64": "TYPE_FIXED64", "sfixed32": "TYPE_SFIXED32",
            "sfixed64": "TYPE_SFIXED64", "bool": "TYPE_BOOL", "string": "TYPE_STRING", "bytes": "TYPE_BYTES"}
_TOKEN = re.compile(r'\s+|//[^\n]*|/\*.*?\*/|("[^"]*"|[A-Za-z_][A-Za-z0-9_.]*|-?\d+|[{}=;])', re.S)


def _tokens(text: str) -> list[str]:
    out, pos = [], 0
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None:
            raise ValueError(f"{PROTO_PATH.name}: unexpected text {text[pos:pos + 20]!r}")
        if m.group(1):
            out.append(m.group(1))
        pos = m.end()
    return out


def file_descriptor(text: str, name: str = "et_def.proto"):
    """The ``FileDescriptorProto`` of a proto3 definition in the subset ``et_def.proto`` uses
    (anything else is a ValueError naming the token)."""
    from google.protobuf import descriptor_pb2

    fd = descriptor_pb2.FileDescriptorProto(name=name, syntax="proto3")
    F = descriptor_pb2.FieldDescriptorProto
    t = _tokens(text)
    i = 0

    def take(expected: str | None = None) -> str:
        nonlocal i
        if i >= len(t):
            raise ValueError(f"{name}: unexpected end of file")
        tok = t[i]
        if expected is not None and tok != expected:
            raise ValueError(f"{name}: expected {expected!r}, got {tok!r}")
        i += 1
        return tok

    enums: set[str] = set()
    typed: list[tuple] = []              # (field, type name) resolved once every name is known
    while i < len(t):
        kw = take()
        if kw == "syntax":
            take("=")
            if take() != '"proto3"':
                raise ValueError(f"{name}: only proto3 is supported")
            take(";")
        elif kw == "package":
            fd.package = take()
            take(";")
        elif kw == "enum":
            e = fd.enum_type.add(name=take())
            enums.add(e.name)
            take("{")
            while t[i] != "}":
                v = e.value.add(name=take())
                take("=")
                v.number = int(take())
                take(";")
            take("}")
        elif kw == "message":
            msg = fd.message_type.add(name=take())
            take("{")
            oneof = None
            while True:
                tok = take()
                if tok == "}":
                    if oneof is None:
                        break
                    oneof = None
                    continue
                if tok == "oneof":
                    oneof = len(msg.oneof_decl)
                    msg.oneof_decl.add(name=take())
                    take("{")
                    continue
                label = F.LABEL_OPTIONAL
                if tok == "repeated":
                    label, tok = F.LABEL_REPEATED, take()
                f = msg.field.add(name=take(), label=label)
                take("=")
                f.number = int(take())
                take(";")
                if oneof is not None:
                    f.oneof_index = oneof
                typed.append((f, tok))
        else:
            raise ValueError(f"{name}: unsupported construct {kw!r}")
    for f, tok in typed:
        if tok in _SCALARS:
            f.type = getattr(F, _SCALARS[tok])
        else:
            f.type = F.TYPE_ENUM if tok in enums else F.TYPE_MESSAGE
            f.type_name = f".{fd.package}.{tok}"
    return fd


@lru_cache(maxsize=1)
def messages():
    """Namespace of the message classes (``Node``, ``GlobalMetadata``, ``AttributeProto``, ...)
    and enums (``NodeType``, ``CollectiveCommType``: name -> number) of the vendored definition."""
    from types import SimpleNamespace

    from google.protobuf import descriptor_pool, message_factory

    fd = file_descriptor(PROTO_PATH.read_text(encoding="utf-8"))
    pool = descriptor_pool.DescriptorPool()
    pool.Add(fd)
    ns = SimpleNamespace()
    for m in fd.message_type:
        setattr(ns, m.name, message_factory.GetMessageClass(pool.FindMessageTypeByName(f"{fd.package}.{m.name}")))
    for e in fd.enum_type:
        setattr(ns, e.name, {v.name: v.number for v in e.value})
    return ns


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= len(data):
            raise ValueError("truncated length prefix")
        b = data[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7
        if shift >= 64:
            raise ValueError("length prefix longer than 10 bytes")


def split_messages(data: bytes) -> list[bytes]:
    """The length-prefixed messages of an ET file's bytes (gunzipped first when gzip)."""
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    out, pos = [], 0
    while pos < len(data):
        size, pos = _varint(data, pos)
        if pos + size > len(data):
            raise ValueError(f"message at byte {pos} announces {size} bytes, {len(data) - pos} remain")
        out.append(data[pos:pos + size])
        pos += size
    return out


def _encode_varint(value: int) -> bytes:
    out = bytearray()
    while True:
        bits = value & 0x7F
        value >>= 7
        if value:
            out.append(0x80 | bits)
        else:
            out.append(bits)
            return bytes(out)


def encode_messages(msgs) -> bytes:
    """Chakra's framing of ``msgs`` (a GlobalMetadata first, then Nodes): each length-prefixed."""
    parts = []
    for m in msgs:
        body = m.SerializeToString()
        parts.append(_encode_varint(len(body)) + body)
    return b"".join(parts)
