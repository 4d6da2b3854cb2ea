"""After a failed run: read what it left behind (logs, Ray's session folder, kernel and cgroup
OOM records) and name the first cause, with its evidence lines and a remedy in verl's keys."""
