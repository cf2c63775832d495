package io.pagewire.node.verbs;

import io.grpc.Status;
import io.grpc.stub.StreamObserver;
import io.pagewire.node.security.CallerAuthentication;
import java.util.concurrent.Executor;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.function.Supplier;

/**
 * How the verbs service answers a unary call: at once for data-path calls, or once the caller's
 * control-plane rate allows it (see {@link ControlPacer}), a refusal past that; and every failure as a
 * status a person can act on ({@link StatusMapping}).
 */
final class ControlCalls {
    /** The longest a paced operation waits; a caller further over its rate is refused. */
    private static final long MAX_PACING_DELAY_NS = 10_000_000_000L;

    private final VerbsContext context;
    private final ControlPacer pacer;
    private final ScheduledExecutorService scheduler;
    /** Where paced operations run once their wait is over (the pool unary calls run on). */
    private final Executor work;

    ControlCalls(VerbsContext context, ScheduledExecutorService scheduler, Executor work) {
        this.context = context;
        this.pacer = new ControlPacer(context.controlOpsPerSecond(), context.controlBurst(), MAX_PACING_DELAY_NS);
        this.scheduler = scheduler;
        this.work = work;
    }

    /** Answers a control-plane call once the caller's rate allows it. */
    <T> void paced(StreamObserver<T> response, Supplier<T> task) {
        pacedStart(response, () -> answer(response, task));
    }

    /** Starts a control-plane call's work once the caller's rate allows it, or refuses the call. */
    void pacedStart(StreamObserver<?> response, Runnable start) {
        long wait = pacer.admit(caller());
        if (wait == 0) {
            start.run();
        } else if (wait == ControlPacer.REFUSE) {
            response.onError(overRate().asRuntimeException());
        } else {
            later(wait, start);
        }
    }

    /** Nanoseconds a control operation of {@code caller} must wait (0: now), or {@link ControlPacer#REFUSE}. */
    long admit(String caller) {
        return pacer.admit(caller);
    }

    /** Runs {@code task} on the call pool. */
    void onPool(Runnable task) {
        work.execute(task);
    }

    /** Runs {@code task} on the call pool after {@code delayNs}. */
    void later(long delayNs, Runnable task) {
        scheduler.schedule(() -> work.execute(task), delayNs, TimeUnit.NANOSECONDS);
    }

    /** What a caller too far over its rate is told. */
    Status overRate() {
        return Status.RESOURCE_EXHAUSTED.withDescription("this caller starts control operations (sessions, allocations, registrations,"
                + " queue pairs, counters) faster than " + context.controlOpsPerSecond() + " per second"
                + " (pagewire.quota.controlOpsPerSecond) for longer than its burst allows; slow down");
    }

    /** Who is calling, as the node's caller authentication named them. */
    static String caller() {
        String caller = CallerAuthentication.CALLER.get();
        return caller == null ? "unknown" : caller;
    }

    /** Answers a unary call with what {@code work} returns, or with the status its failure maps to. */
    static <T> void answer(StreamObserver<T> response, Supplier<T> work) {
        T result;
        try {
            result = work.get();
        } catch (RuntimeException e) {
            response.onError(StatusMapping.toStatus(e));
            return;
        }
        response.onNext(result);
        response.onCompleted();
    }

    /** Operations control calls started later than asked (their caller was over its rate). */
    long delayed() {
        return pacer.delayed();
    }

    /** Control calls refused because their caller was so far over its rate that they would wait too long. */
    long refused() {
        return pacer.refused();
    }
}
