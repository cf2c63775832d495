package io.pagewire.client.impl;

import io.grpc.stub.StreamObserver;
import java.util.concurrent.CompletableFuture;
import java.util.function.Consumer;

/** Adapts gRPC's asynchronous unary calls to {@link CompletableFuture}. */
final class Calls {
    private Calls() {
    }

    static <T> CompletableFuture<T> unary(Consumer<StreamObserver<T>> call) {
        CompletableFuture<T> future = new CompletableFuture<>();
        call.accept(new StreamObserver<>() {
            @Override
            public void onNext(T value) {
                future.complete(value);
            }

            @Override
            public void onError(Throwable t) {
                future.completeExceptionally(t);
            }

            @Override
            public void onCompleted() {
                // The value already completed the future.
            }
        });
        return future;
    }
}
