package io.pagewire.node.verbs;

import io.grpc.stub.StreamObserver;
import io.pagewire.node.nic.EventCounter;
import io.pagewire.proto.verbs.AwaitEventCounterRequest;
import io.pagewire.proto.verbs.AwaitEventCounterResponse;
import io.pagewire.proto.verbs.CreateEventCounterRequest;
import io.pagewire.proto.verbs.CreateEventCounterResponse;
import io.pagewire.proto.verbs.DestroyEventCounterRequest;
import io.pagewire.proto.verbs.DestroyEventCounterResponse;
import io.pagewire.proto.verbs.ReadEventCounterRequest;
import io.pagewire.proto.verbs.ReadEventCounterResponse;
import java.util.concurrent.ScheduledExecutorService;

/** The calls on a session's event counters: create, destroy, read, and wait for a value (NetVM's notifications). */
final class CounterCalls {
    private final Sessions sessions;
    private final ControlCalls control;
    private final ScheduledExecutorService scheduler;

    CounterCalls(Sessions sessions, ControlCalls control, ScheduledExecutorService scheduler) {
        this.sessions = sessions;
        this.control = control;
        this.scheduler = scheduler;
    }

    void createEventCounter(CreateEventCounterRequest request, StreamObserver<CreateEventCounterResponse> response) {
        control.paced(response, () -> {
            EventCounter counter = sessions.get(request.getEndpoint()).endpoint.createEventCounter(WireCodes.access(request.getAccessList()));
            return CreateEventCounterResponse.newBuilder().setCounterId(counter.id()).build();
        });
    }

    void destroyEventCounter(DestroyEventCounterRequest request, StreamObserver<DestroyEventCounterResponse> response) {
        control.paced(response, () -> {
            Session session = sessions.get(request.getEndpoint());
            EventCounter counter = session.counter(request.getCounterId());
            session.unwatch(counter);
            session.endpoint.destroyEventCounter(counter);
            return DestroyEventCounterResponse.getDefaultInstance();
        });
    }

    void readEventCounter(ReadEventCounterRequest request, StreamObserver<ReadEventCounterResponse> response) {
        ControlCalls.answer(response, () -> ReadEventCounterResponse.newBuilder()
                .setValue(sessions.get(request.getEndpoint()).counter(request.getCounterId()).value()).build());
    }

    /** Answers once the counter reaches the target, or at the timeout with its value then (see {@link CounterWait}). */
    void awaitEventCounter(AwaitEventCounterRequest request, StreamObserver<AwaitEventCounterResponse> response) {
        try {
            Session session = sessions.get(request.getEndpoint());
            CounterWait.start(session, session.counter(request.getCounterId()), request.getTarget(), request.getTimeoutMs(), response, scheduler);
        } catch (RuntimeException e) {
            response.onError(StatusMapping.toStatus(e));
        }
    }
}
