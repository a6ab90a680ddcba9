"""Where imagecheck never sends a request (a server-side request forgery guard), in one
place.

A registry names further URLs: its token realm, and every redirect it answers (to a blob
store, a CDN, a login page). A hostile or broken registry can point them at a cloud
instance-metadata service, whose answer (an IAM role's keys, a service account's token) would
then come back as a "token" and be sent on, or at a ``file://`` URL. So the registry clients
ask :func:`check_destination` about **every** request before it is sent: the ping, the
manifest, the token request and each redirect hop (``client.py`` calls it from its request
event hook, which httpx runs before each hop, before a connection or a DNS lookup). Refused:

* a URL that is not ``http``/``https``: a :class:`ProtocolError`, never retried;
* a cloud metadata *name*, compared as written (case, trailing dot) before anything is resolved,
  so no DNS query for it ever leaves the machine: :data:`METADATA_NAMES`;
* a cloud metadata *address*: :data:`METADATA_ADDRESSES`;
* any other link-local address (:data:`LINK_LOCAL`), where metadata services live and no
  registry should: except on the very host the user named as the registry (or mirror), so
  that ``imagecheck check 169.254.7.7:5000/app`` still works. That host never excuses a
  realm or a redirect to a *different* host, nor a metadata address.

Addresses are recognized in every spelling the resolver or the socket layer accepts: dotted,
decimal (``2852039166``), hex (``0xa9fea9fe``), octal, short (``169.254.43518``), IPv4-mapped
(``::ffff:169.254.169.254``) and NAT64 (``64:ff9b::a9fe:a9fe``) IPv6, with or without a zone.

Not covered: a DNS name of one's own that *resolves* to a metadata address (as in
go-containerregistry's ``validateRealmURL``, this needs a check of the connected peer
address, or network policy). Private (RFC 1918) and loopback addresses are allowed: that is
where private registries and their token services live.
"""

from __future__ import annotations

import functools
import ipaddress
import socket
import urllib.parse

import httpx

from imagecheck._text import printable
from imagecheck.errors import ProtocolError

# The request extension that carries the registry host the user named (see client.py).
NAMED_HOST = "imagecheck.named_host"

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

# Instance-metadata services, by the names their clouds publish.
METADATA_NAMES = frozenset(
    {
        "metadata.google.internal",  # GCP
        "metadata.goog",  # GCP
        "metadata",  # GCP: the short name, through the VM's search domain
        "instance-data",  # AWS: likewise
        "instance-data.ec2.internal",  # AWS
        "metadata.tencentyun.com",  # Tencent Cloud
    }
)

# Instance-metadata and host-agent services, by address: refused even as the named registry.
METADATA_ADDRESSES = frozenset(
    ipaddress.ip_address(a)
    for a in (
        "169.254.169.254",  # AWS, GCP, Azure, Oracle, DigitalOcean, Hetzner, OpenStack
        "fd00:ec2::254",  # AWS over IPv6
        "169.254.170.2",  # AWS ECS task metadata and credentials
        "169.254.170.23",  # AWS EKS Pod Identity agent
        "fd00:ec2::23",  # AWS EKS Pod Identity agent over IPv6
        "100.100.100.200",  # Alibaba Cloud
        "192.0.0.192",  # Oracle Cloud (classic)
        "168.63.129.16",  # Azure WireServer
    )
)

LINK_LOCAL = (ipaddress.ip_network("169.254.0.0/16"), ipaddress.ip_network("fe80::/10"))
_NAT64 = ipaddress.ip_network("64:ff9b::/96")


def named_host(host: str) -> dict[str, str]:
    """Request extensions saying that ``host`` is the registry the user named."""
    return {NAMED_HOST: host}


def check_destination(request: httpx.Request) -> None:
    """Raise :class:`ProtocolError` when ``request`` must not be sent (see the module doc)."""
    named = request.extensions.get(NAMED_HOST)
    reason = refusal(request.url, named_host=named if isinstance(named, str) else None)
    if reason is None:
        return
    if request.url.scheme not in ("http", "https"):
        # Only a redirect gets here: every URL imagecheck builds itself is http(s).
        scheme = printable(request.url.scheme, 20)
        raise ProtocolError(f"refusing to follow a {scheme}: URL: {reason}")
    raise ProtocolError(f"refusing to send a request to {shown(request.url)}: {reason}")


def refusal(url: httpx.URL, *, named_host: str | None = None) -> str | None:
    """Why ``url`` must not be requested, or ``None`` when it may be."""
    if url.scheme not in ("http", "https"):
        return "not an http(s) URL"
    host = url.raw_host.decode("ascii", "replace").lower().rstrip(".")
    if host in METADATA_NAMES:
        return "a cloud metadata service name"
    address = numeric_host(host)
    if address is None:
        return None
    if address in METADATA_ADDRESSES:
        return "a cloud metadata service address"
    if any(address in net for net in LINK_LOCAL) and url.host != named_host:
        return "a link-local address"
    return None


def shown(url: httpx.URL) -> str:
    """``scheme://host[:port]`` of ``url``, safe to print (never the path or the query)."""
    port = f":{url.port}" if url.port is not None else ""
    host = url.raw_host.decode("ascii", "replace")
    return printable(f"{url.scheme}://{host}{port}")


@functools.lru_cache(maxsize=1024)  # asked for every request: a few hosts, parsed once each
def numeric_host(host: str) -> IPAddress | None:
    """The address a numeric host names, in every spelling a resolver accepts, as the IPv4
    address for IPv4-mapped and NAT64 IPv6; ``None`` for a DNS name."""
    host = urllib.parse.unquote(host.strip("[]")).partition("%")[0].rstrip(".")
    try:
        address: IPAddress = ipaddress.ip_address(host)
    except ValueError:
        try:
            # inet_aton: decimal, hex, octal and short forms, as getaddrinfo reads them.
            return ipaddress.IPv4Address(socket.inet_aton(host))
        except (OSError, ValueError):
            return None
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            return address.ipv4_mapped
        if address in _NAT64:
            return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    return address
