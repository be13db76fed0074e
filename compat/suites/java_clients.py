"""Suite 1: Kafka's Java clients (kafka-clients 3.9), through the program in compat/java.

The program (odradek.compat.ClientSuite) runs its cases one after another and prints a line
per case; this module starts it with the cluster's address (and, on the SASL_SSL cluster, the
administrator's and the unprivileged user's client properties, which add the SCRAM and ACL
cases) and turns its lines into the suite's result.
"""

from __future__ import annotations

from compat import java_build
from compat.context import SuiteContext
from compat.suite import DURABLE, CaseResult, Status, SuiteResult, Variant, missing_api, one_line
from odradek.local.cluster import LocalCluster
from odradek.local.security import CLIENT_USER

NAME = "java-clients"
ORDER = 1
TITLE = "Kafka's Java clients: AdminClient, idempotent/transactional producers, consumers"
VARIANTS = (Variant(), Variant("sasl_ssl", security="sasl_ssl", quick=False))
BROKER_OVERRIDES = DURABLE
MAIN = "odradek.compat.ClientSuite"
HEAP = ("-Xmx512M",)

_STATUS = {"PASS": Status.PASSED, "FAIL": Status.FAILED, "SKIP": Status.SKIPPED, "MISSING": Status.FAILED}


def prepare() -> None:
    """Compile the program unless this source state was built (a no-op after bootstrap)."""
    java_build.build()


def run(cluster: LocalCluster, ctx: SuiteContext, quick: bool) -> SuiteResult:
    args = ["--bootstrap", cluster.bootstrap_servers]
    admin_config = ctx.command_config()
    if admin_config is not None:
        args += ["--config", str(admin_config), "--user-config", str(ctx.command_config(CLIENT_USER))]
    if quick:
        args.append("--quick")
    done = ctx.jvm.run(MAIN, args, classpath=java_build.classpath(), heap=HEAP, timeout=600 if quick else 1800)
    return parse(done.stdout, ended=done.summary())


def parse(stdout: str, ended: str) -> SuiteResult:
    """The result the program's lines describe (sans-IO).  A planned case without a line
    failed because the program ended first; ``ended`` says how."""
    result = SuiteResult()
    planned: list[str] = []
    reported: set[str] = set()
    for line in stdout.splitlines():
        fields = line.split("\t")
        if fields[0] == "VERSION" and len(fields) == 3:
            result.versions[fields[1]] = fields[2]
        elif fields[0] == "PLAN" and len(fields) == 2:
            planned = [n for n in fields[1].split(",") if n]
        elif fields[0] == "CASE" and len(fields) == 5:
            name, status, seconds, cause = fields[1:]
            if status == "MISSING":
                api, _, evidence = cause.partition(": ")
                cause = missing_api(api, evidence)
            result.cases.append(CaseResult(name, _STATUS[status], one_line(cause), float(seconds)))
            reported.add(name)
    if not planned:
        result.cases.append(CaseResult("(program)", Status.FAILED, one_line(f"no plan printed; {ended}")))
    for name in planned:
        if name not in reported:
            result.cases.append(CaseResult(name, Status.FAILED, one_line(f"no result: the program ended ({ended})")))
    return result
