"""SMTP PIPELINING (RFC 2920): against a server that offers it, the envelope (MAIL, each
RCPT, DATA) goes out as one group and the answers are read together. The raw server here
holds every answer until it has read DATA, so a client that waited for each answer before
the next command would time out: what arrives proves the commands went as a group. It
can answer the group in one write or in small pieces (answers cut across packets), refuse
the sender or recipients, or hang up instead of answering. Offering CHUNKING (RFC 3030)
as well, it takes the message as `BDAT <size> LAST` in the same group."""

from __future__ import annotations

import asyncio

import pytest

from pipelines.adapters.smtp_client import SmtpTransport
from tests.support.smtp_sink import SmtpSink

MAIL_FROM = "bounce+msg_1@bounces.postroom.test"
# The transport's whole-transaction bound: short, so a client that did not pipeline fails
# the test in seconds instead of hanging it.
CLIENT_TIMEOUT_SECONDS = 3.0
READ_TIMEOUT_SECONDS = 10.0


def mime(to: str) -> bytes:
    return (f"Message-ID: <msg_1@postroom.test>\r\nFrom: a@postroom.test\r\nTo: {to}\r\nSubject: Hi\r\n\r\n"
            ".a line that starts with a dot\r\nHello\r\n").encode()


class GroupServer:
    """`rcpt`: address → answer (default 250); `mail` / `data`: the MAIL and DATA answers;
    `split`: the group's answers written a few bytes at a time; `hang_up`: the connection
    closed once DATA is read, nothing answered; `mute`: the message read whole, and its
    answer never written (the connection held open until the client lets go);
    `chunking`: CHUNKING offered too, `bdat` the answer to an accepted message's chunk."""

    def __init__(self, *, rcpt: dict[str, bytes] | None = None, mail: bytes = b"250 2.1.0 ok",
                 data: bytes = b"354 go on", split: bool = False, hang_up: bool = False, mute: bool = False,
                 chunking: bool = False, bdat: bytes = b"250 2.0.0 queued"):
        self.rcpt, self.mail, self.data, self.split, self.hang_up = rcpt or {}, mail, data, split, hang_up
        self.mute, self.chunking, self.bdat = mute, chunking, bdat
        self.sessions = 0
        self.commands: list[bytes] = []   # every command line read, in order
        self.messages: list[bytes] = []   # what followed each 354, up to the lone dot
        self.server: asyncio.AbstractServer | None = None
        self.url = ""

    async def __aenter__(self) -> GroupServer:
        self.server = await asyncio.start_server(self._session, "127.0.0.1", 0)
        self.url = f"smtp://127.0.0.1:{self.server.sockets[0].getsockname()[1]}"
        return self

    async def __aexit__(self, *_exc) -> None:
        self.server.close()
        await self.server.wait_closed()

    async def _answer(self, writer: asyncio.StreamWriter, lines: list[bytes]) -> None:
        data = b"".join(line + b"\r\n" for line in lines)
        if not self.split:
            writer.write(data)
            await writer.drain()
            return
        for i in range(0, len(data), 7):  # cut across answers and inside them
            writer.write(data[i:i + 7])
            await writer.drain()
            await asyncio.sleep(0.005)

    async def _session(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        async def line() -> bytes:
            return await asyncio.wait_for(reader.readline(), READ_TIMEOUT_SECONDS)
        self.sessions += 1
        try:
            writer.write(b"220 group.test ESMTP\r\n")
            await line()  # EHLO
            writer.write(b"250-group.test\r\n250-PIPELINING\r\n" + (b"250-CHUNKING\r\n" if self.chunking else b"")
                         + b"250 SIZE 10000000\r\n")
            held: list[bytes] = []
            while command := await line():
                self.commands.append(command.rstrip(b"\r\n"))
                verb = command[:4].upper()
                if verb == b"MAIL":
                    held.append(self.mail)
                elif verb == b"RCPT":
                    address = command.split(b"<", 1)[1].split(b">", 1)[0].decode()
                    held.append(self.rcpt.get(address, b"250 2.1.5 ok"))
                elif verb == b"DATA":
                    if self.hang_up:
                        return
                    await self._answer(writer, [*held, self.data])
                    held = []
                    if self.data.startswith(b"354"):
                        body = await asyncio.wait_for(self._read_message(reader), READ_TIMEOUT_SECONDS)
                        self.messages.append(body)
                        if self.mute:  # until the client closes (read returns b"")
                            await asyncio.wait_for(reader.read(), READ_TIMEOUT_SECONDS)
                            return
                        await self._answer(writer, [b"250 2.0.0 queued" if body else b"554 5.5.1 no valid recipients"])
                elif verb == b"BDAT" and self.chunking:  # "BDAT <size> LAST": the chunk read whole, always
                    chunk = await asyncio.wait_for(reader.readexactly(int(command.split()[1])), READ_TIMEOUT_SECONDS)
                    self.messages.append(chunk)
                    if self.mute:  # until the client closes (read returns b"")
                        await asyncio.wait_for(reader.read(), READ_TIMEOUT_SECONDS)
                        return
                    sender_ok, anyone = held[0].startswith(b"250"), any(a.startswith(b"250") for a in held[1:])
                    await self._answer(writer, [*held, self.bdat if sender_ok and anyone else
                                                b"554 5.5.1 no valid recipients" if sender_ok else
                                                b"503 5.5.1 no valid sender"])
                    held = []
                elif verb == b"QUIT":
                    writer.write(b"221 bye\r\n")
                    return
                else:  # RSET, NOOP
                    await self._answer(writer, [b"250 ok"])
        except (TimeoutError, ConnectionError, asyncio.IncompleteReadError):
            return
        finally:
            writer.close()

    @staticmethod
    async def _read_message(reader: asyncio.StreamReader) -> bytes:
        """The message up to the lone dot (b"" when the client sent the lone dot alone)."""
        first = await reader.readline()
        if first == b".\r\n":
            return b""
        return first + (await reader.readuntil(b"\r\n.\r\n"))[:-3]


async def send(url: str, recipients: list[str]):
    transport = SmtpTransport(url, timeout=CLIENT_TIMEOUT_SECONDS)
    try:
        async with asyncio.timeout(READ_TIMEOUT_SECONDS):
            return await transport.send(MAIL_FROM, recipients, mime(recipients[0]), "msg_1")
    finally:
        await transport.close()


@pytest.mark.parametrize("split", [False, True], ids=["answers in one write", "answers cut across packets"])
async def test_the_envelope_goes_as_one_group_and_every_answer_is_read(split):
    async with GroupServer(split=split, rcpt={"gone@example.org": b"550 5.1.1 no such user"}) as server:
        outcomes = await send(server.url, ["a@example.org", "gone@example.org", "b@example.org"])
    assert outcomes["a@example.org"].accepted and outcomes["b@example.org"].accepted
    assert (outcomes["gone@example.org"].code, outcomes["gone@example.org"].text) == (550, "5.1.1 no such user")
    assert [c.split(b":")[0] for c in server.commands[:5]] == [b"MAIL FROM", b"RCPT TO", b"RCPT TO", b"RCPT TO",
                                                              b"DATA"]
    assert server.commands[0].startswith(b"MAIL FROM:<bounce+msg_1@bounces.postroom.test> SIZE=")
    # dot-stuffed on the wire, and the message is the one given
    assert server.messages == [mime("a@example.org").replace(b"\r\n.a line", b"\r\n..a line")]


async def test_every_recipient_refused_after_data_was_taken_ends_the_empty_message_and_reports_each():
    refusals = {"x@example.org": b"550 5.1.1 unknown", "y@example.org": b"452 4.2.2 mailbox full"}
    async with GroupServer(rcpt=refusals) as server:
        outcomes = await send(server.url, ["x@example.org", "y@example.org"])
    assert (outcomes["x@example.org"].code, outcomes["x@example.org"].permanent) == (550, True)
    assert (outcomes["y@example.org"].code, outcomes["y@example.org"].transient) == (452, True)
    assert server.messages == [b""]  # the lone dot, no content
    assert server.commands[-2:] == [b"RSET", b"QUIT"]  # the envelope reset for the next message


async def test_every_recipient_refused_and_data_refused_sends_no_dot():
    async with GroupServer(rcpt={"x@example.org": b"550 5.1.1 unknown"}, data=b"554 5.5.1 no valid recipients") \
            as server:
        outcomes = await send(server.url, ["x@example.org"])
    assert outcomes["x@example.org"].code == 550
    assert server.messages == []
    assert server.commands[-2:] == [b"RSET", b"QUIT"]


async def test_a_refused_sender_refuses_every_recipient_with_its_answer():
    async with GroupServer(mail=b"451 4.7.1 sender deferred", data=b"503 5.5.1 no valid sender") as server:
        outcomes = await send(server.url, ["a@example.org", "b@example.org"])
    assert {r: (o.code, o.text) for r, o in outcomes.items()} == {
        "a@example.org": (451, "4.7.1 sender deferred"), "b@example.org": (451, "4.7.1 sender deferred")}
    assert server.messages == []


async def test_a_refused_sender_whose_data_was_taken_gets_the_empty_message_ended():
    async with GroupServer(mail=b"550 5.7.1 sender rejected") as server:
        outcomes = await send(server.url, ["a@example.org"])
    assert outcomes["a@example.org"].code == 550
    assert server.messages == [b""]


async def test_a_server_that_hangs_up_instead_of_answering_is_a_transient_failure():
    async with GroupServer(hang_up=True) as server:
        outcomes = await send(server.url, ["a@example.org"])
    assert outcomes["a@example.org"].transient and outcomes["a@example.org"].code == 0
    assert "connection failed" in outcomes["a@example.org"].text


async def test_a_server_that_never_answers_the_message_is_given_up_on_at_the_transport_timeout():
    """The transaction's one bound (SmtpTransport's timeout) covers the wait for the
    message's answer: the recipient is owed a retry, and the reason says what happened."""
    async with GroupServer(mute=True) as server:
        started = asyncio.get_running_loop().time()
        outcomes = await send(server.url, ["a@example.org"])
        waited = asyncio.get_running_loop().time() - started
    assert server.messages, "the message was written whole before the wait"
    assert outcomes["a@example.org"].transient and outcomes["a@example.org"].code == 0
    assert outcomes["a@example.org"].text == f"connection failed: no answer within {CLIENT_TIMEOUT_SECONDS:g} s"
    assert CLIENT_TIMEOUT_SECONDS - 0.5 <= waited < READ_TIMEOUT_SECONDS


async def test_a_connection_reused_after_a_refused_group_sends_the_next_message():
    async with GroupServer(rcpt={"x@example.org": b"550 5.1.1 unknown"}) as server:
        transport = SmtpTransport(server.url, size=1, timeout=CLIENT_TIMEOUT_SECONDS)
        try:
            async with asyncio.timeout(READ_TIMEOUT_SECONDS):
                first = await transport.send(MAIL_FROM, ["x@example.org"], mime("x@example.org"), "m1")
                second = await transport.send(MAIL_FROM, ["a@example.org"], mime("a@example.org"), "m2")
        finally:
            await transport.close()
    assert first["x@example.org"].code == 550 and second["a@example.org"].accepted
    assert server.messages == [b"", mime("a@example.org").replace(b"\r\n.a line", b"\r\n..a line")]


def test_a_real_receiver_offering_pipelining_gets_each_message_to_the_recipients_it_took():
    sink = SmtpSink(pipelining=True).start()
    try:
        sink.reject("gone@example.org")
        outcomes = asyncio.run(send(sink.url, ["a@example.org", "gone@example.org"]))
        assert outcomes["a@example.org"].accepted and outcomes["gone@example.org"].code == 550
        received = sink.wait_for("a@example.org")
        assert received[0].rcpt_tos == ["a@example.org"]
        assert received[0].message["Subject"] == "Hi"
    finally:
        sink.stop()


# --- CHUNKING (RFC 3030): the message goes as BDAT in the envelope's group ---------------

async def test_with_chunking_the_whole_transaction_is_one_group_and_the_message_arrives_as_written():
    async with GroupServer(chunking=True, split=True, rcpt={"gone@example.org": b"550 5.1.1 no such user"}) \
            as server:
        outcomes = await send(server.url, ["a@example.org", "gone@example.org"])
    message = mime("a@example.org")
    assert server.commands[:4] == [b"MAIL FROM:<" + MAIL_FROM.encode() + b"> SIZE=%d" % len(message),
                                   b"RCPT TO:<a@example.org>", b"RCPT TO:<gone@example.org>",
                                   b"BDAT %d LAST" % len(message)]
    assert b"DATA" not in server.commands
    assert server.messages == [message]  # byte for byte: no dot doubled, no end marker
    assert outcomes["a@example.org"].accepted
    assert (outcomes["gone@example.org"].code, outcomes["gone@example.org"].permanent) == (550, True)


async def test_with_chunking_a_connection_whose_chunk_was_accepted_carries_the_next_message():
    async with GroupServer(chunking=True) as server:
        transport = SmtpTransport(server.url, size=1, timeout=CLIENT_TIMEOUT_SECONDS)
        try:
            async with asyncio.timeout(READ_TIMEOUT_SECONDS):
                for n in range(3):
                    outcomes = await transport.send(MAIL_FROM, [f"r{n}@example.org"], mime(f"r{n}@example.org"), "m")
                    assert outcomes[f"r{n}@example.org"].accepted
        finally:
            await transport.close()
    assert server.sessions == 1
    assert server.messages == [mime(f"r{n}@example.org") for n in range(3)]


@pytest.mark.parametrize("refusal", ["every recipient", "the sender", "the message"])
async def test_with_chunking_a_refused_chunk_fails_its_recipients_and_the_next_message_gets_a_new_connection(
        refusal):
    options = {"every recipient": {"rcpt": {"x@example.org": b"550 5.1.1 unknown"}},
               "the sender": {"mail": b"550 5.7.1 sender rejected"},
               "the message": {"bdat": b"552 5.3.4 message too big"}}[refusal]
    async with GroupServer(chunking=True, **options) as server:
        transport = SmtpTransport(server.url, size=1, timeout=CLIENT_TIMEOUT_SECONDS)
        try:
            async with asyncio.timeout(READ_TIMEOUT_SECONDS):
                first = await transport.send(MAIL_FROM, ["x@example.org"], mime("x@example.org"), "m1")
                if refusal != "every recipient":  # the sender or the message: refused again
                    server.mail, server.bdat = b"250 2.1.0 ok", b"250 2.0.0 queued"
                second = await transport.send(MAIL_FROM, ["a@example.org"], mime("a@example.org"), "m2")
        finally:
            await transport.close()
    expected = {"every recipient": 550, "the sender": 550, "the message": 552}[refusal]
    assert first["x@example.org"].code == expected and first["x@example.org"].permanent
    assert second["a@example.org"].accepted
    assert server.sessions == 2  # the refused transaction's connection was not reused
    assert server.messages[-1] == mime("a@example.org")


async def test_with_chunking_a_server_that_never_answers_the_chunk_is_given_up_on_at_the_timeout():
    async with GroupServer(chunking=True, mute=True) as server:
        outcomes = await send(server.url, ["a@example.org"])
    assert server.messages == [mime("a@example.org")]
    assert outcomes["a@example.org"].transient
    assert outcomes["a@example.org"].text == f"connection failed: no answer within {CLIENT_TIMEOUT_SECONDS:g} s"

