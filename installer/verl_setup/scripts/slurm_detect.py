"""detect --slurm: one task per node under srun, with this package on PYTHONPATH (a shared
filesystem): the node's name, `detect --json`, and the interface that routes to the first node.
argv: FIRST_NODE."""

import json
import os
import socket
import sys

from verl_setup.doctor.probes.network import route_interface
from verl_setup.host.detect import detect

print(
    json.dumps(
        {
            "node": os.environ.get("SLURMD_NODENAME") or socket.gethostname(),
            "hostname": socket.gethostname(),
            "host": json.loads(detect().to_json()),
            "iface_to_head": route_interface(sys.argv[1]),
        }
    )
)
