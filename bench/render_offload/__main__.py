"""How much a heavy render slows another workspace's mail, by where rendering runs.

    .venv/bin/python -m bench.render_offload [--heavy 40] [--round-trips 20]

A "light job" stands for delivering one message of another workspace: --round-trips
sequential request/response exchanges over TCP with a server in another process (the
store, RabbitMQ and SMTP are all other processes), on the worker's event loop. Its
latency is measured alone, then while a heavy render job runs beside it on the same loop:
--heavy messages whose template spends most of the render budget (two nested loops over
200 items), rendered by the real pipelines.templates.render_message.render_all with DKIM signing,
  - inline: on the event loop (what the worker did before);
  - thread: asyncio.to_thread (shares the GIL with the loop);
  - process: actors.render_pool (a spawn'd process pool, slices of 20 messages).
Prints the light job's median / p95 / max latency in each case and the heavy job's wall
time. Latencies, not a pass/fail: run it on a quiet machine, compare within one run."""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import statistics
import time

from actors import render_pool, runtime
from pipelines.core.settings import Settings
from pipelines.messages import dkim
from pipelines.templates.personalise import stored_template_data
from pipelines.templates.render_message import RenderContext, render_all

HEAVY_HTML = "<p>{{#each rows}}{{#each rows}}{{this}} {{/each}}<br>{{/each}}</p>{{unsubscribe_url}}"


def _echo_server(port_out) -> None:
    async def handle(reader, writer):
        while line := await reader.readline():
            writer.write(line)
            await writer.drain()

    async def main():
        server = await asyncio.start_server(handle, "127.0.0.1", 0)
        port_out.put(server.sockets[0].getsockname()[1])
        await server.serve_forever()
    asyncio.run(main())


def heavy_job(count: int) -> tuple[list[dict], RenderContext]:
    settings = Settings(secret_key="bench", base_url="https://mail.example", render_processes=2)
    pair = dkim.generate_key_pair()
    signer = dkim.Signer("postroom.test", "pr1", dkim._load_private_key(pair.private_pem))
    messages = [{"_id": f"msg_{i}", "workspace_id": "w1", "kind": "transactional", "to": [f"r{i}@x.test"],
                 "subject": "Report {{n}}", "html": HEAVY_HTML, "text": None,
                 **stored_template_data({"rows": list(range(200)), "n": i}),
                 "from_address": "news@postroom.test", "from_name": "News", "reply_to": None,
                 "track_opens": False, "track_clicks": False} for i in range(count)]
    ctx = RenderContext(settings=settings, workspaces={"w1": {"_id": "w1", "name": "W"}}, signers={dkim.SHARED: signer})
    return messages, ctx


async def light_latencies(port: int, round_trips: int, stop: asyncio.Event, every: float) -> list[float]:
    """A light job arrives every `every` seconds; its latency counts from its arrival, so
    time spent waiting for a blocked loop counts too."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    out, arrival = [], time.perf_counter()
    while not stop.is_set():
        wait = arrival - time.perf_counter()
        if wait > 0:
            await asyncio.sleep(wait)
        for _ in range(round_trips):
            writer.write(b"ping\n")
            await writer.drain()
            await reader.readline()
        out.append(time.perf_counter() - arrival)
        arrival += every
    writer.close()
    return out


async def run_case(mode: str, port: int, args, messages, ctx) -> tuple[list[float], float]:
    stop = asyncio.Event()
    light = asyncio.create_task(light_latencies(port, args.round_trips, stop, 0.02))
    await asyncio.sleep(0.2)  # the light job is running before the heavy one starts
    start = time.perf_counter()
    if mode == "alone":
        await asyncio.sleep(2)
        result = None
    elif mode == "inline":
        result = render_all(messages, ctx)
    elif mode == "thread":
        result = await asyncio.to_thread(render_all, messages, ctx)
    else:
        result = await render_pool.render_off_loop(messages, ctx)
    wall = time.perf_counter() - start
    if result is not None:
        assert len(result.rendered) == len(messages), result.failed
    stop.set()
    return await light, wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--heavy", type=int, default=40)
    parser.add_argument("--round-trips", type=int, default=20)
    args = parser.parse_args()
    ports = multiprocessing.Queue()
    server = multiprocessing.Process(target=_echo_server, args=(ports,), daemon=True)
    server.start()
    port = ports.get(timeout=10)
    messages, ctx = heavy_job(args.heavy)
    runtime.configure(ctx.settings)

    async def all_cases():
        await render_pool.render_off_loop(messages[:2], ctx)  # start the pool outside the measurement
        for mode in ("alone", "inline", "thread", "process"):
            latencies, wall = await run_case(mode, port, args, messages, ctx)
            latencies.sort()
            p95 = latencies[int(len(latencies) * 0.95)] if latencies else float("nan")
            median = statistics.median(latencies)
            print(f"  {mode:<8} light job ({args.round_trips} round trips): median {median * 1000:7.1f} ms"
                  f"  p95 {p95 * 1000:7.1f} ms  max {latencies[-1] * 1000:7.1f} ms  ({len(latencies)} runs);"
                  f"  heavy render of {args.heavy}: {wall:.2f} s")
    print(f"heavy: {args.heavy} messages, two nested loops over 200 items each "
          "(80,400 of 100,000 budget steps), DKIM-signed")
    asyncio.run(all_cases())
    server.terminate()


if __name__ == "__main__":
    main()
