#!/usr/bin/env bash
# A one-machine Slurm cluster for the `slurm` tests (and for trying `launcher=slurm`):
# installs Debian's slurm-wlm, munge, slurmdbd and MariaDB if missing, writes a minimal
# slurm.conf (root, proctrack/linuxproc, select/cons_tres with memory per CPU so jobs share
# the node; KillWait=2: a cancelled job gets SIGKILL 2 s after SIGTERM, which submitit's jobs
# ignore, instead of Slurm's default 30 s) and slurmdbd.conf (accounting: without it sacct
# fails and submitit cannot see a cancelled job end), and starts munged, MariaDB, slurmdbd,
# slurmctld and slurmd.
#
#   sudo bash scripts/slurm_local.sh        # idempotent: exits 0 at once when Slurm answers
#
# Needs root and apt (Debian 12: slurm 22.05). Exit 0: `sinfo` shows an idle node.
set -euo pipefail

STATE=${SLURM_LOCAL_DIR:-/var/lib/grpo-ablate-slurm}
CLUSTER=grpo
log() { echo "slurm_local: $*" >&2; }

if sinfo -h -o %T 2>/dev/null | grep -q idle; then
    log "Slurm is up: $(sinfo -h -o '%P %D %T' | head -1)"
    exit 0
fi
[ "$(id -u)" = 0 ] || { log "needs root (it installs packages and starts daemons)"; exit 1; }

packages="slurmctld slurmd slurm-client slurmdbd munge mariadb-server"
missing=$(for p in $packages; do dpkg -s "$p" >/dev/null 2>&1 || echo "$p"; done)
if [ -n "$missing" ]; then
    log "installing $(echo $missing)"
    export DEBIAN_FRONTEND=noninteractive
    apt-get install -y -q --no-install-recommends $missing >/dev/null 2>&1 \
        || { apt-get update -q >/dev/null 2>&1 \
             && apt-get install -y -q --no-install-recommends $missing >/dev/null 2>&1; } \
        || { log "apt-get could not install: $(echo $missing)"; exit 1; }
fi

mkdir -p "$STATE"/{ctld,spool,log,run} /etc/slurm /run/munge
chown munge:munge /run/munge
[ -s /etc/munge/munge.key ] || { dd if=/dev/urandom of=/etc/munge/munge.key bs=1024 count=1 2>/dev/null
                                 chown munge:munge /etc/munge/munge.key; chmod 400 /etc/munge/munge.key; }
if ! munge -n 2>/dev/null | unmunge >/dev/null 2>&1; then
    runuser -u munge -- /usr/sbin/munged
fi

# Accounting: MariaDB + slurmdbd.
if ! mysqladmin ping >/dev/null 2>&1; then
    (service mariadb start || service mysql start) >/dev/null 2>&1 \
        || { mysqld_safe >/dev/null 2>&1 & }
    for _ in $(seq 60); do mysqladmin ping >/dev/null 2>&1 && break; sleep 0.5; done
fi
mysql -e "CREATE DATABASE IF NOT EXISTS slurm_acct_db;
          CREATE USER IF NOT EXISTS 'slurm'@'localhost' IDENTIFIED BY 'slurm';
          GRANT ALL ON slurm_acct_db.* TO 'slurm'@'localhost';"

host=$(hostname -s)
cat > /etc/slurm/slurmdbd.conf <<EOF
AuthType=auth/munge
DbdHost=localhost
SlurmUser=root
StorageType=accounting_storage/mysql
StorageHost=localhost
StorageUser=slurm
StoragePass=slurm
StorageLoc=slurm_acct_db
LogFile=$STATE/log/slurmdbd.log
PidFile=$STATE/run/slurmdbd.pid
EOF
chmod 600 /etc/slurm/slurmdbd.conf

node=$(slurmd -C | head -1)
cat > /etc/slurm/slurm.conf <<EOF
ClusterName=$CLUSTER
SlurmctldHost=$host
SlurmUser=root
AuthType=auth/munge
MpiDefault=none
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
DefMemPerCPU=2048
KillWait=2
ReturnToService=2
StateSaveLocation=$STATE/ctld
SlurmdSpoolDir=$STATE/spool
SlurmctldPidFile=$STATE/run/slurmctld.pid
SlurmdPidFile=$STATE/run/slurmd.pid
SlurmctldLogFile=$STATE/log/slurmctld.log
SlurmdLogFile=$STATE/log/slurmd.log
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=localhost
JobAcctGatherType=jobacct_gather/none
$node
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP
EOF

pgrep -x slurmdbd >/dev/null || /usr/sbin/slurmdbd
for _ in $(seq 40); do sacctmgr -n list cluster >/dev/null 2>&1 && break; sleep 0.5; done
sacctmgr -n list cluster format=cluster | grep -qw "$CLUSTER" || sacctmgr -i add cluster "$CLUSTER" >/dev/null
pgrep -x slurmctld >/dev/null || /usr/sbin/slurmctld
pgrep -x slurmd >/dev/null || /usr/sbin/slurmd
for _ in $(seq 60); do
    if sinfo -h -o %T 2>/dev/null | grep -q idle; then
        log "Slurm is up: $(sinfo -h -o '%P %D %T' | head -1)"
        exit 0
    fi
    sleep 0.5
done
log "Slurm did not come up; logs in $STATE/log"
exit 1
