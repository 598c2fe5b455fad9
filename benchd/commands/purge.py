"""``benchd purge``: empty a namespace of everything benchd owns there, sentinel last.

The way to retire a probe, or the namespace of a replica that is gone. It
lists the namespace and deletes only records benchd wrote (its ids, or its
mark where the store assigns ids; with an earlier version's sentinel, that
version's bare fixture ids too), then the sentinel; records of anyone else
stay. Refused while another live instance holds the namespace's lease,
unless ``--force``. What it prints is counted by a listing taken after the
deletes: a store's own counts are no proof.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping, Sequence
from typing import Any

from benchd.config.load import ProbeConfig, load_config
from benchd.config.locate import locate_config
from benchd.config.secrets import read_secret
from benchd.errors import EXIT_OK, EXIT_TARGET, UsageError
from benchd.fixtures.model import load_fixture
from benchd.kinds import build_target, capabilities_of, register_kinds
from benchd.kinds.zengram import ZengramConfig, ZengramTarget
from benchd.store.lease import LeaseHolder, default_instance
from benchd.store.target import ProbeTarget

__all__ = ["register"]


def register(sub: Any) -> None:
    p = sub.add_parser(
        "purge",
        help="delete everything benchd owns in a namespace (sentinel last)",
        description=(
            "Delete every record benchd wrote in a namespace, then its sentinel, and print "
            "what went; records benchd did not write are left alone. Either --config FILE "
            "[--probe NAME]... (the probes' namespaces) or --namespace NAME --url URL "
            "(a zengram store, e.g. the namespace of a replica that is gone). Refused while "
            "another live benchd instance holds the namespace's lease, unless --force. "
            "Exit codes: 0 done, 2 bad flags or config, 3 store unreachable, refused, leased, or "
            "records of benchd's still listed after their deletes."
        ),
    )
    p.add_argument(
        "--config",
        "-c",
        metavar="FILE",
        help="TOML config naming the probes (default: $BENCHD_CONFIG, else ./benchd.toml)",
    )
    p.add_argument(
        "--probe", "-p", action="append", default=[], metavar="NAME", help="only this probe"
    )
    p.add_argument("--namespace", metavar="NAME", help="a zengram namespace (client_id)")
    p.add_argument("--url", metavar="URL", help="the zengram store, with --namespace")
    p.add_argument("--api-key-env", metavar="VAR", help="environment variable holding the key")
    p.add_argument("--api-key-file", metavar="FILE", help="file holding the key")
    p.add_argument(
        "--force", action="store_true", help="purge even while another live instance leases it"
    )
    p.set_defaults(handler=_handle)


def _targets(
    args: argparse.Namespace,
) -> list[tuple[str, str, ProbeTarget, Sequence[Mapping[str, Any]]]]:
    """(label, namespace, target, fixture memories) for each namespace to purge (a JSON Lines
    fixture's memories are not read: purge needs their ids)."""
    if args.config and args.namespace:
        raise UsageError("give --config or --namespace/--url, not both")
    if args.namespace:
        if not args.url:
            raise UsageError("--namespace needs --url (the zengram store)")
        secret = read_secret(env=args.api_key_env, file=args.api_key_file, where="benchd purge")
        settings = ZengramConfig(url=args.url, namespace=args.namespace)
        store = ZengramTarget(settings, secret)
        return [(f"namespace {args.namespace!r}", args.namespace, store, [])]
    found = locate_config(args.config)
    path = found.required("purge", "--namespace NAME --url URL")
    found.announce()
    register_kinds()  # config decodes [probe.target] with the kinds handed to it
    config = load_config(path)
    probes: list[ProbeConfig] = (
        [config.probe(n) for n in args.probe] if args.probe else list(config.probes)
    )
    out: list[tuple[str, str, ProbeTarget, Sequence[Mapping[str, Any]]]] = []
    for probe in probes:
        caps = capabilities_of(probe.target.kind, probe.target.settings)
        if not (caps.lists and caps.deletes):
            raise UsageError(
                f"probe {probe.name}: kind {probe.target.kind} cannot purge: "
                + "; ".join(caps.lacks())
            )
        lease = None
        if caps.lease:  # never takes over a live lease, even this host's daemon's
            instance = config.server.instance or default_instance()
            lease = LeaseHolder(instance, ttl_s=0.0, role="purge")
        target = build_target(
            probe.target.kind, probe.target.settings, probe.target.secret, lease=lease
        )
        memories = load_fixture(probe.fixture).memories
        out.append((f"probe {probe.name}", probe.target.namespace or "", target, memories))
    return out


async def _handle(args: argparse.Namespace) -> int:
    code = EXIT_OK
    for label, ns, target, memories in _targets(args):
        try:
            purged = await target.purge(memories, force=args.force)
        finally:
            await target.aclose()
        # counted by a listing taken after the deletes, not by what the store said
        print(
            f"{label}: namespace {ns!r}: deleted {purged.records} benchd record(s) and "
            f"{purged.sentinels} sentinel(s); left {purged.foreign} record(s) benchd did not write"
        )
        if purged.kept:
            print(
                f"{label}: namespace {ns!r}: {purged.kept} of benchd's record(s) still listed "
                "after their deletes: the store did not delete them; run purge again or check "
                "the store",
                file=sys.stderr,
            )
            code = EXIT_TARGET
    sys.stdout.flush()
    return code
