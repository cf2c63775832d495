package io.pagewire.node.nic;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.pagewire.kernel.KernelContext;
import io.pagewire.proto.fabric.Opcode;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * A queue pair moves through the states of {@code ibv_modify_qp} as an RC queue pair does: RTR answers
 * without sending, SQD drains, ERROR flushes in order, RESET gives a pair that connects again, and the
 * owner's timers and retry counts decide when a request gives up; the asynchronous events come with them.
 */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class QueuePairStatesTest {
    private static final int LENGTH = 64 << 10;
    private final TwoNics nics = new TwoNics(memory(), memory(), new NicContext().ackTimeoutNs(20_000_000), new NicContext().ackTimeoutNs(20_000_000));
    private final BlockingQueue<String> eventsA = new LinkedBlockingQueue<>();
    private final BlockingQueue<String> eventsB = new LinkedBlockingQueue<>();
    private final MemoryRegion src;
    private final MemoryRegion dst;

    QueuePairStatesTest() {
        nics.ea.listenToQueuePairs((qpn, event) -> eventsA.add(qpn + ":" + event));
        nics.eb.listenToQueuePairs((qpn, event) -> eventsB.add(qpn + ":" + event));
        src = nics.ea.register(nics.ea.space().allocate(LENGTH), LENGTH, RegistrationMode.PINNED, Access.all());
        dst = nics.eb.register(nics.eb.space().allocate(LENGTH), LENGTH, RegistrationMode.PINNED, Access.all());
    }

    private static KernelContext memory() {
        return new KernelContext().physicalMemoryBytes(16 << 20).swapBytes(0);
    }

    @AfterEach
    void close() {
        nics.close();
    }

    @Test
    void errorFlushesEverySendAndReceiveInPostingOrder() throws InterruptedException {
        nics.link.drop = p -> true; // nothing arrives: the sends stay outstanding
        for (int i = 1; i <= 5; i++) {
            nics.qa.post(WorkRequest.write(i, src.lkey(), src.address(), 4096, dst.address(), dst.rkey()));
        }
        for (int i = 11; i <= 13; i++) {
            nics.qa.postReceive(new ReceiveRequest(i, src.lkey(), src.address(), 4096));
        }
        nics.qa.moveToError();
        List<Long> order = new ArrayList<>();
        for (int i = 0; i < 8; i++) {
            Completion c = nics.take(nics.cqa, "flush " + i);
            assertThat(c.status()).as(c.toString()).isEqualTo(CompletionStatus.FLUSHED);
            order.add(c.wrId());
        }
        assertThat(order).containsExactly(1L, 2L, 3L, 4L, 5L, 11L, 12L, 13L);
        nics.qa.post(WorkRequest.write(6, src.lkey(), src.address(), 8, dst.address(), dst.rkey()));
        nics.qa.postReceive(new ReceiveRequest(14, src.lkey(), src.address(), 8));
        assertThat(nics.take(nics.cqa, "post after ERROR").status()).isEqualTo(CompletionStatus.FLUSHED);
        assertThat(nics.take(nics.cqa, "receive after ERROR").status()).isEqualTo(CompletionStatus.FLUSHED);
        assertThat(nics.qa.state()).isEqualTo(QueuePairState.ERROR);
        assertThat(eventsA).as("the owner's own move raises no QP_FATAL").isEmpty();
    }

    /**
     * A NIC acknowledges what it executed as it receives it, before its owner can see the completion:
     * a responder whose owner destroys, errors or resets the pair after a SEND executed but before the
     * batch's acknowledgement went out still acknowledges it, and the requester's request succeeds
     * (ibv_rc_pingpong's server once saw "transport retry counter exceeded" for its last SEND when the
     * client closed its device at once).
     */
    @Test
    void aPairStoppedBeforeItsBatchWasAcknowledgedStillAcknowledgesWhatItExecuted() throws InterruptedException {
        for (String teardown : List.of("close", "error", "reset")) {
            TwoNics pair = new TwoNics(memory(), memory(), new NicContext().ackTimeoutNs(20_000_000), new NicContext().ackTimeoutNs(20_000_000));
            try {
                MemoryRegion from = pair.ea.register(pair.ea.space().allocate(4096), 4096, RegistrationMode.PINNED, Access.all());
                MemoryRegion into = pair.eb.register(pair.eb.space().allocate(4096), 4096, RegistrationMode.PINNED, Access.all());
                pair.qb.postReceive(new ReceiveRequest(7, into.lkey(), into.address(), 4096));
                BlockingQueue<Packet> held = new LinkedBlockingQueue<>();
                pair.link.drop = p -> p.getOpcode() == Opcode.SEND_ONLY && held.add(p.copy()); // the SEND reaches B by hand
                pair.qa.post(WorkRequest.send(1, from.lkey(), from.address(), 64));
                Packet send = held.poll(10, TimeUnit.SECONDS);
                assertThat(send).as(teardown + ": the SEND left A").isNotNull();
                pair.link.drop = p -> p.getOpcode() == Opcode.SEND_ONLY; // its retransmissions find B stopped anyway
                pair.qb.receive(send); // executed: the receive completes; the batch's acknowledgement is not out yet
                assertThat(pair.takeSuccess(pair.cqb, teardown + ": the receive").wrId()).isEqualTo(7);
                switch (teardown) { // the owner, having seen the completion
                    case "close" -> pair.qb.close();
                    case "error" -> pair.qb.moveToError();
                    default -> pair.b.reset(pair.qb);
                }
                Completion sent = pair.take(pair.cqa, "the SEND, its responder stopped by " + teardown);
                assertThat(sent.status()).as(teardown + ": " + sent + pair.state()).isEqualTo(CompletionStatus.SUCCESS);
            } finally {
                pair.close();
            }
        }
    }

    @Test
    void resetGivesAPairThatConnectsAgainAndIgnoresTheOldConnection() throws InterruptedException {
        nics.qa.post(WorkRequest.write(1, src.lkey(), src.address(), LENGTH, dst.address(), dst.rkey()));
        nics.takeSuccess(nics.cqa, "first connection");
        nics.qa.postReceive(new ReceiveRequest(50, src.lkey(), src.address(), 64));
        nics.link.drop = p -> true;
        nics.qa.post(WorkRequest.write(2, src.lkey(), src.address(), 4096, dst.address(), dst.rkey()));

        QueuePair freshA = nics.a.reset(nics.qa);
        QueuePair freshB = nics.b.reset(nics.qb);
        assertThat(freshA.qpn()).isEqualTo(nics.qa.qpn());
        assertThat(freshA.state()).isEqualTo(QueuePairState.INIT);
        assertThat(nics.cqa.poll()).as("RESET drops what was posted without completions").isNull();
        assertThat(nics.a.queuePair(freshA.qpn())).isSameAs(freshA);

        nics.link.drop = p -> false;
        ConnectionAttributes second = ConnectionAttributes.defaults(nics.a.context()).withPsns(0xfffff0, 0x123456);
        freshA.connect(freshB.address(), second);
        freshB.connect(freshA.address(), second.withPsns(0x123456, 0xfffff0));
        for (int i = 0; i < 3; i++) {
            freshA.post(WorkRequest.write(10 + i, src.lkey(), src.address(), LENGTH, dst.address(), dst.rkey()));
            nics.takeSuccess(nics.cqa, "write " + i + " of the second connection");
        }
        freshB.post(WorkRequest.read(20, dst.lkey(), dst.address(), LENGTH, src.address(), src.rkey()));
        nics.takeSuccess(nics.cqb, "a READ the other way, from its own first PSN");
        assertThat(freshA.attributes().sendPsn()).isEqualTo(0xfffff0);
    }

    @Test
    void readyToReceiveAnswersThePeerSendsNothingAndRaisesCommunicationEstablishedOnce() throws InterruptedException {
        QueuePair qa = nics.a.reset(nics.qa);
        QueuePair qb = nics.b.reset(nics.qb);
        ConnectionAttributes attributes = ConnectionAttributes.defaults(nics.a.context());
        qb.readyToReceive(qa.address(), attributes);
        assertThatThrownBy(() -> qb.post(WorkRequest.write(1, dst.lkey(), dst.address(), 8, src.address(), src.rkey())))
                .isInstanceOf(NicException.class).hasMessageContaining("not connected for sending");
        qa.connect(qb.address(), attributes);
        for (int i = 0; i < 2; i++) {
            qa.post(WorkRequest.write(i, src.lkey(), src.address(), 4096, dst.address(), dst.rkey()));
            nics.takeSuccess(nics.cqa, "write " + i + " to a pair in RTR");
        }
        assertThat(eventsB.poll(5, TimeUnit.SECONDS)).isEqualTo(qb.qpn() + ":COMMUNICATION_ESTABLISHED");
        qb.readyToSend(attributes);
        qb.post(WorkRequest.write(7, dst.lkey(), dst.address(), 8, src.address(), src.rkey()));
        nics.takeSuccess(nics.cqb, "the first write once RTS");
        assertThat(eventsB).as("COMM_EST comes once").isEmpty();
    }

    @Test
    void drainFinishesStartedRequestsHoldsLaterOnesAndSaysWhenDrained() throws InterruptedException {
        nics.link.drop = p -> true;
        nics.qa.post(WorkRequest.write(1, src.lkey(), src.address(), LENGTH, dst.address(), dst.rkey()));
        nics.qa.drainSendQueue();
        nics.qa.post(WorkRequest.write(2, src.lkey(), src.address(), 4096, dst.address(), dst.rkey()));
        assertThat(eventsA.poll(200, TimeUnit.MILLISECONDS)).as("the started write is still unacknowledged").isNull();
        nics.link.drop = p -> false;
        assertThat(nics.takeSuccess(nics.cqa, "the write started before the drain").wrId()).isEqualTo(1);
        assertThat(eventsA.poll(5, TimeUnit.SECONDS)).isEqualTo(nics.qa.qpn() + ":SEND_QUEUE_DRAINED");
        assertThat(nics.cqa.take(300, TimeUnit.MILLISECONDS)).as("the write posted during the drain waits").isNull();
        nics.qa.readyToSend(nics.qa.attributes());
        assertThat(nics.takeSuccess(nics.cqa, "the write posted during the drain, after RTS").wrId()).isEqualTo(2);
    }

    @Test
    void theOwnersRetryCountEndsARequestToASilentPeerAndRaisesFatal() throws InterruptedException {
        QueuePair qa = nics.a.reset(nics.qa);
        QueuePair qb = nics.b.reset(nics.qb);
        qb.connect(qa.address());
        qa.connect(qb.address(), new ConnectionAttributes(0, 0, 5_000_000, 1, 0, 100_000));
        nics.link.drop = p -> true;
        long start = System.nanoTime();
        qa.post(WorkRequest.write(1, src.lkey(), src.address(), 4096, dst.address(), dst.rkey()));
        Completion c = nics.take(nics.cqa, "a write to a silent peer");
        long tookMs = (System.nanoTime() - start) / 1_000_000;
        assertThat(c.status()).as(c.toString()).isEqualTo(CompletionStatus.RETRY_EXCEEDED);
        assertThat(c.error()).contains("after 1 retransmissions (5 ms apart");
        assertThat(tookMs).as("two 5-20 ms timeouts, not the node's 7 of 20-80 ms").isLessThan(1_000);
        assertThat(eventsA.poll(5, TimeUnit.SECONDS)).isEqualTo(qa.qpn() + ":FATAL");
    }

    @Test
    void theOwnersRnrRetryCountEndsASendNobodyReceives() throws InterruptedException {
        QueuePair qa = nics.a.reset(nics.qa);
        QueuePair qb = nics.b.reset(nics.qb);
        qb.connect(qa.address(), new ConnectionAttributes(0, 0, 20_000_000, 7, 7, 1_000_000));
        qa.connect(qb.address(), new ConnectionAttributes(0, 0, 20_000_000, 7, 2, 100_000));
        qa.post(WorkRequest.send(1, src.lkey(), src.address(), 64));
        Completion c = nics.take(nics.cqa, "a SEND with no receive posted");
        assertThat(c.status()).as(c.toString()).isEqualTo(CompletionStatus.RNR_RETRY_EXCEEDED);
        assertThat(c.error()).contains("3 times");
    }

    @Test
    void aPairOnASharedReceiveQueueSaysLastWqeReachedWhenItFails() throws InterruptedException {
        SharedReceiveQueue srq = nics.eb.createSharedReceiveQueue();
        QueuePair onSrq = nics.b.createQueuePair(nics.eb, nics.cqb, srq);
        onSrq.moveToError();
        assertThat(eventsB.poll(5, TimeUnit.SECONDS)).isEqualTo(onSrq.qpn() + ":LAST_WQE_REACHED");
        assertThat(eventsB.poll(100, TimeUnit.MILLISECONDS)).as("no QP_FATAL for the owner's move").isNull();
    }
}
