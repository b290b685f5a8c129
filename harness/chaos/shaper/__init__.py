"""The packet shaper: a program that runs in a helper container sharing a node's network
namespace and delays, reorders, duplicates or drops that node's packets in userspace.

These kernels (and many CI kernels) have no netem qdisc; iptables' NFQUEUE target hands each
matching packet to a userspace listener that decides when, whether and how often it goes on.
Every module here uses only Python's standard library: the package is copied as it is into
the helper container, whose Python has nothing else installed.

- policy.py: when each packet goes on (pure, seeded);
- nfqueue.py: the netlink protocol of NFQUEUE (bind a queue, read packets, give verdicts);
- main.py: the program (install the rules, shape until SIGTERM, remove them, print figures).
"""
