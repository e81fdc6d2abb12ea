"""A peer that takes every packet and connection and never answers.

    python3 silent_peer.py ADDRESS PORT [--udp]

On TCP it accepts connections and reads them without ever writing (a proxy
that never completes a CONNECT, a backend frozen after accept); with --udp it
also takes datagrams on the same port and answers none (a nameserver that
never answers, when ADDRESS:53 is the resolv.conf's nameserver). PORT 0 takes
a free port. Prints `ready PORT` once listening; runs until killed.
"""
import socket
import sys
import threading


def main() -> None:
    address, port = sys.argv[1], int(sys.argv[2])
    udp = "--udp" in sys.argv[3:]
    tcp = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    tcp.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    tcp.bind((address, port))
    tcp.listen(256)
    port = tcp.getsockname()[1]
    held = []

    def accept() -> None:
        while True:
            connection, _ = tcp.accept()
            held.append(connection)  # kept open, never written to

    threading.Thread(target=accept, daemon=True).start()
    if udp:
        datagrams = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        datagrams.bind((address, port))
    print(f"ready {port}", flush=True)
    if udp:
        while True:
            datagrams.recvfrom(65536)
    threading.Event().wait()


if __name__ == "__main__":
    main()
