"""A download this machine could not make, told apart from a rendezvous (both say "Name or service not known"):
a build fetching its prebuilt wheel (flash-attn's setup.py), a script fetching a file. The URL the log shows, the
host, and how to get the file without this machine reaching it. core.train.diagnosis_report asks it right before
the families of core.train.diagnosis_families (whose network reason would read it as a rendezvous).
"""

from __future__ import annotations

import re

from core.i18n import _
from core.train.diagnosis_families import FamilyFinding

DOWNLOAD = re.compile(r"urlopen error|URLError|Could not resolve host|HTTPSConnectionPool|Failed to establish a new "
                      r"connection|ProxyError|SSLError|Max retries exceeded with url")
RENDEZVOUS_WORDS = re.compile(r"(?i)rendezvous|TCPStore|MASTER_ADDR|c10d|gloo|nccl|init_process_group|torchrun")


def download_finding(root: str, log_text: str) -> FamilyFinding | None:
    """A download this machine could not make (a build fetching its prebuilt wheel, a script fetching a file): the
    URL, and how to get the file without it."""
    if not DOWNLOAD.search(root) or RENDEZVOUS_WORDS.search(root):
        return None
    urls = re.findall(r"https?://[^\s'\"<>]+", root + "\n" + log_text)
    url = next((u for u in reversed(urls) if not re.search(r"github\.com/[\w-]+/[\w-]+/issues|pip\.pypa", u)), None)
    host = re.match(r"https?://([^/:]+)", url).group(1) if url else _("the server")
    facts = [_("the download: {url}", url=url)] if url else []
    if re.search(r"Could not resolve host: " + re.escape(host), log_text):
        facts.append(_("this machine cannot resolve {host} (the log's curl)", host=host))
    fix = _("This machine cannot reach {host}: download the file on a machine that can and install or copy it from "
            "there (`pip install ./file.whl`), or set the proxy (HTTPS_PROXY) or a mirror.", host=host)
    commands = [f"curl -sSI {url}" if url else "curl -sSI https://pypi.org"]
    if "flash" in (url or "") + root.lower() or "flash-attn" in log_text[-4000:]:
        fix += " " + _("flash-attn's setup.py downloads its prebuilt wheel first: build it from source without the "
                       "download instead (`FLASH_ATTENTION_FORCE_BUILD=TRUE`).")
        commands.insert(0, "FLASH_ATTENTION_FORCE_BUILD=TRUE pip install flash-attn --no-build-isolation")
    return FamilyFinding("hub-download", _("A download failed: {host} cannot be reached from this machine", host=host),
                         _("The step needs a file from {host}, and this machine has no route to it (no DNS, no "
                           "network, or a firewall), so it stopped (\"{said}\").", host=host, said=root[:160]),
                         fix, commands, facts)
