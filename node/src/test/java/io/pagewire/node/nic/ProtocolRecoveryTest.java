package io.pagewire.node.nic;

import static org.assertj.core.api.Assertions.assertThat;

import io.pagewire.kernel.KernelAgent;
import io.pagewire.kernel.KernelContext;
import io.pagewire.proto.fabric.Opcode;
import java.util.Random;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.function.Predicate;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * The reliable transport recovers from each kind of loss on its own, shown by dropping exactly one
 * chosen packet once on a wire between two NICs.
 */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class ProtocolRecoveryTest {
    private static final int MTU = 1024;
    private final DirectLink link = new DirectLink();
    /** Each NIC's timers, counted: an idle NIC schedules no timer task, so an idle node never wakes for it. */
    private final CountingNicTimers timersA = new CountingNicTimers("a");
    private final CountingNicTimers timersB = new CountingNicTimers("b");
    private final KernelAgent kernelA = KernelAgent.start(new KernelContext().name("a").physicalMemoryBytes(8 << 20).swapBytes(0));
    private final KernelAgent kernelB = KernelAgent.start(new KernelContext().name("b").physicalMemoryBytes(8 << 20).swapBytes(0));
    private final Nic a = nic("a", kernelA, timersA);
    private final Nic b = nic("b", kernelB, timersB);
    private final Endpoint ea = a.openEndpoint("a");
    private final Endpoint eb = b.openEndpoint("b");
    private final CompletionQueue cq = a.createCompletionQueue();
    private final QueuePair qa = a.createQueuePair(ea, cq);
    private final QueuePair qb = b.createQueuePair(eb, b.createCompletionQueue());
    private final int length = 40 * MTU;
    private final MemoryRegion src;
    private final MemoryRegion dst;
    private final MemoryRegion back;

    ProtocolRecoveryTest() {
        link.add("a", a);
        link.add("b", b);
        qa.connect(qb.address());
        qb.connect(qa.address());
        src = ea.register(ea.space().allocate(length), length, RegistrationMode.PINNED, Access.all());
        back = ea.register(ea.space().allocate(length), length, RegistrationMode.PINNED, Access.all());
        dst = eb.register(eb.space().allocate(length), length, RegistrationMode.PINNED, Access.all());
        byte[] data = new byte[length];
        new Random(5).nextBytes(data);
        ea.space().store(src.address(), data, 0, length);
    }

    private Nic nic(String name, KernelAgent kernel, NicTimers timers) {
        NicContext context = new NicContext().mtuBytes(MTU).ackTimeoutNs(20_000_000).readRequestPackets(8).sendWindowPackets(64);
        return new Nic(name, kernel, context, timers, link.transportFor(name));
    }

    private int timerTasks() {
        return timersA.scheduled() + timersB.scheduled();
    }

    /** Waits until neither NIC has a timer task left to run: their sweeps have found every pair idle. */
    private void awaitTimersIdle() throws InterruptedException {
        assertThat(timersA.awaitIdle(5, TimeUnit.SECONDS) && timersB.awaitIdle(5, TimeUnit.SECONDS))
                .as("timer tasks keep being scheduled after the pairs went idle\n" + qa.describe() + "\n" + qb.describe()).isTrue();
    }

    @AfterEach
    void close() {
        a.close();
        b.close();
        link.close();
        kernelA.close();
        kernelB.close();
    }

    /** Drops the first packet that matches, once. */
    private void dropOnce(Predicate<Packet> which) {
        Set<String> dropped = ConcurrentHashMap.newKeySet();
        link.drop = p -> which.test(p) && dropped.add("once");
    }

    private void writeAndReadBackIntact() throws InterruptedException {
        qa.post(WorkRequest.write(1, src.lkey(), src.address(), length, dst.address(), dst.rkey()));
        Completion w = cq.take(20, TimeUnit.SECONDS);
        assertThat(w).isNotNull();
        assertThat(w.ok()).as(w.toString()).isTrue();
        qa.post(WorkRequest.read(2, back.lkey(), back.address(), length, dst.address(), dst.rkey()));
        Completion r = cq.take(20, TimeUnit.SECONDS);
        assertThat(r).isNotNull();
        assertThat(r.ok()).as(r.toString()).isTrue();
        byte[] expected = new byte[length];
        byte[] actual = new byte[length];
        ea.space().load(src.address(), expected, 0, length);
        ea.space().load(back.address(), actual, 0, length);
        assertThat(actual).isEqualTo(expected);
    }

    @Test
    void aLostMiddleSegmentIsNakedAndResent() throws Exception {
        dropOnce(p -> p.getOpcode() == Opcode.WRITE_MIDDLE && p.getPsn() == 5);
        writeAndReadBackIntact();
        assertThat(b.counters().get(NicCounter.SEQUENCE_NAKS_SENT)).isEqualTo(1);
        assertThat(a.counters().get(NicCounter.RETRANSMITTED_AFTER_SEQUENCE_NAK)).isPositive();
        assertThat(a.counters().retransmitted()).as("every resend has a cause").isEqualTo(a.counters().get(NicCounter.RETRANSMITTED_AFTER_SEQUENCE_NAK)
                + a.counters().get(NicCounter.RETRANSMITTED_AFTER_ACK_TIMEOUT));
    }

    @Test
    void aLostLastSegmentIsRecoveredByTheTimeout() throws Exception {
        dropOnce(p -> p.getOpcode() == Opcode.WRITE_LAST);
        writeAndReadBackIntact();
        assertThat(a.counters().get(NicCounter.ACK_TIMEOUTS)).isPositive();
    }

    @Test
    void anIdleNicSchedulesNoTimerWorkAndTheSweepStopsOnceThePairsAreIdle() throws Exception {
        // Connecting is done in the constructor; only a timer task or traffic schedules timer work.
        assertThat(timerTasks()).as("timer tasks of two NICs with connected, unused pairs").isZero();
        writeAndReadBackIntact();
        assertThat(timerTasks()).as("the write armed the timeout sweep").isPositive();
        awaitTimersIdle();
    }

    @Test
    void aLossAfterThePairWasIdleThroughSweepsIsStillRecoveredByTheTimeout() throws Exception {
        // The sweep stops taking an idle pair's lock once it has found the pair idle; work queued
        // after that must bring it back, or a lost last segment would wait forever.
        writeAndReadBackIntact();
        awaitTimersIdle();
        dropOnce(p -> p.getOpcode() == Opcode.WRITE_LAST);
        writeAndReadBackIntact();
        assertThat(a.counters().get(NicCounter.ACK_TIMEOUTS)).isPositive();
    }

    @Test
    void aLostAcknowledgementIsRecoveredByTheResentDuplicate() throws Exception {
        dropOnce(p -> p.getOpcode() == Opcode.ACKNOWLEDGE && p.getAckPsn() == length / MTU - 1);
        writeAndReadBackIntact();
        assertThat(b.counters().get(NicCounter.DUPLICATE_PACKETS)).isPositive();
    }

    @Test
    void aLostReadResponseIsAskedForAgain() throws Exception {
        dropOnce(p -> p.getOpcode() == Opcode.READ_RESPONSE && p.getPsn() == length / MTU + 3);
        writeAndReadBackIntact();
        assertThat(b.counters().get(NicCounter.DUPLICATE_PACKETS)).as("the READ came again").isPositive();
    }

    @Test
    void aRepeatedReadRequestIsAnsweredOnlyUpToWhatTheResponderReached() throws Exception {
        // The READ spans five requests of 8 responses. Lose response 30 and the last request (32):
        // the requester then asks again from 30 for 8 responses (30..37), but the responder never
        // executed 32..37. Answering them from the repeat would let the requester stop asking for
        // 32 while the responder waits for it: a deadlock.
        int firstReadPsn = length / MTU;
        Set<Long> dropped = ConcurrentHashMap.newKeySet();
        link.drop = p -> (p.getOpcode() == Opcode.READ_RESPONSE && p.getPsn() == firstReadPsn + 30
                || p.getOpcode() == Opcode.READ_REQUEST && p.getPsn() == firstReadPsn + 32) && dropped.add(p.getPsn());
        writeAndReadBackIntact();
        assertThat(dropped).hasSize(2);
    }

    @Test
    void aRepeatedFetchAddReturnsTheSameResultAndAddsOnce() throws Exception {
        EventCounter counter = eb.createEventCounter(Access.all());
        dropOnce(p -> p.getOpcode() == Opcode.ATOMIC_ACKNOWLEDGE);
        qa.post(WorkRequest.fetchAdd(1, counter.id(), 5));
        Completion done = cq.take(20, TimeUnit.SECONDS);
        assertThat(done).isNotNull();
        assertThat(done.ok()).isTrue();
        assertThat(done.value()).isZero();
        assertThat(counter.value()).as("the repeat was answered from the replay cache").isEqualTo(5);
    }
}
