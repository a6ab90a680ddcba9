"""One hostile HTTP/1.1 server for the tests, answering in one of two ways.

:class:`HostileServer` is the core: listeners on ``127.0.0.1``, a thread per connection and
a cap on them, TLS ClientHellos refused with a plain 400 as Go's ``net/http`` does (so a
client's HTTPS probe of a loopback registry falls back to HTTP at once), requests read with
bounds, the journal of :class:`Exchange`, the actions every way of answering shares
(:class:`Reply`, :class:`Hang`, :class:`Trickle`, :class:`Reset`, and bodies made as they
are sent: :class:`Endless`, :class:`GzipBomb`, :class:`DeepJson`), and a close that ends
every hang, trickle and stream and joins every thread.

The two ways of answering are subclasses: :class:`tests.support.faultproxy.FaultProxy`
forwards to an upstream registry unless a rule says otherwise (the forwarding parts are
here: :class:`Upstream`, :class:`Forward`, :class:`Respond`, :class:`Flood` and the actions
that alter a relayed answer); :class:`tests.support.standin.StandIn` answers from a
hypothesis script, by the role of each request.
"""

from tests.support.hostile._actions import Framing, Hang, Reply, Reset, Trickle, reason
from tests.support.hostile._bodies import (
    Body,
    DeepJson,
    Endless,
    GzipBomb,
    body_chunks,
    body_size,
    gzip_bomb,
)
from tests.support.hostile._journal import Exchange, Journal
from tests.support.hostile._proxying import (
    HTML_502_PAGE,
    Flood,
    Forward,
    Relayed,
    Replace,
    Respond,
    Rewrite,
    SetHeaders,
    StripHeaders,
    Upstream,
    altered,
    http_date,
    oci_errors,
)
from tests.support.hostile._server import HostileServer
from tests.support.hostile._wire import Connection, CutShort, Request

__all__ = [
    "HTML_502_PAGE",
    "Body",
    "Connection",
    "CutShort",
    "DeepJson",
    "Endless",
    "Exchange",
    "Flood",
    "Forward",
    "Framing",
    "GzipBomb",
    "Hang",
    "HostileServer",
    "Journal",
    "Relayed",
    "Replace",
    "Reply",
    "Request",
    "Reset",
    "Respond",
    "Rewrite",
    "SetHeaders",
    "StripHeaders",
    "Trickle",
    "Upstream",
    "altered",
    "body_chunks",
    "body_size",
    "gzip_bomb",
    "http_date",
    "oci_errors",
    "reason",
]
