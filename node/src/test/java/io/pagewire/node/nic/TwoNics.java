package io.pagewire.node.nic;

import static org.assertj.core.api.Assertions.assertThat;

import io.pagewire.kernel.KernelAgent;
import io.pagewire.kernel.KernelContext;
import java.util.concurrent.TimeUnit;

/**
 * The setting of the NIC protocol tests: two NICs named "a" and "b", each over its own kernel, on a
 * {@link DirectLink}, with an endpoint, a completion queue and a queue pair on each, connected to
 * each other. {@link #state} is what a failing test prints.
 */
final class TwoNics implements AutoCloseable {
    final DirectLink link;
    final KernelAgent kernelA;
    final KernelAgent kernelB;
    final Nic a;
    final Nic b;
    final Endpoint ea;
    final Endpoint eb;
    final CompletionQueue cqa;
    final CompletionQueue cqb;
    final QueuePair qa;
    final QueuePair qb;
    /** Each NIC's timers, counted, so a test can wait for their work to end. */
    final CountingNicTimers timersA = new CountingNicTimers("a");
    final CountingNicTimers timersB = new CountingNicTimers("b");

    TwoNics(KernelContext kernelContextA, KernelContext kernelContextB, NicContext nicA, NicContext nicB) {
        this(kernelContextA, kernelContextB, nicA, nicB, 1);
    }

    /** As above, each NIC's inbound packets delivered on {@code lanes} threads at once (a queue pair's in order). */
    TwoNics(KernelContext kernelContextA, KernelContext kernelContextB, NicContext nicA, NicContext nicB, int lanes) {
        link = new DirectLink(lanes);
        kernelA = KernelAgent.start(kernelContextA.name("a"));
        kernelB = KernelAgent.start(kernelContextB.name("b"));
        a = new Nic("a", kernelA, nicA, timersA, link.transportFor("a"));
        b = new Nic("b", kernelB, nicB, timersB, link.transportFor("b"));
        link.add("a", a);
        link.add("b", b);
        ea = a.openEndpoint("a");
        eb = b.openEndpoint("b");
        cqa = a.createCompletionQueue();
        cqb = b.createCompletionQueue();
        qa = a.createQueuePair(ea, cqa);
        qb = b.createQueuePair(eb, cqb);
        qa.connect(qb.address());
        qb.connect(qa.address());
    }

    /** The queue pairs' sequence state and both sides' counters. */
    String state() {
        return "\n" + qa.describe() + "\n" + qb.describe() + "\na:\n" + a.counters() + kernelA.counters() + "b:\n" + b.counters()
                + kernelB.counters();
    }

    /** The next completion on a queue, failing with the state when none comes within 20 s. */
    Completion take(CompletionQueue cq, String what) throws InterruptedException {
        Completion c = cq.take(20, TimeUnit.SECONDS);
        assertThat(c).as("no completion for " + what + state()).isNotNull();
        return c;
    }

    /** As {@link #take}, which must have succeeded. */
    Completion takeSuccess(CompletionQueue cq, String what) throws InterruptedException {
        Completion c = take(cq, what);
        assertThat(c.status()).as(what + ": " + c.error() + state()).isEqualTo(CompletionStatus.SUCCESS);
        return c;
    }

    @Override
    public void close() {
        a.close();
        b.close();
        link.close();
        kernelA.close();
        kernelB.close();
    }
}
