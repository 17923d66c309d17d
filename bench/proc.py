"""What Linux's /proc tells of a process, for the benchmark scripts."""
import os


def status_mb(pid, field="VmRSS"):
    """A memory field of /proc/PID/status (VmRSS: now, VmHWM: peak), in MiB."""
    with open(f"/proc/{pid}/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith(field + ":")) / 1024


def rss_mb(pid):
    return status_mb(pid, "VmRSS")


def cpu_seconds(pid):
    """User and system CPU time the process has used."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
