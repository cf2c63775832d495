package io.pagewire.tools.testbed;

import java.util.ArrayDeque;
import java.util.Deque;

/**
 * What a measurement or a test cluster opened (queue pairs, regions, connections), closed in
 * reverse order by a try-with-resources block or its owner's close. A failing close never hides the error that ended the measurement: Java
 * attaches it to that error as suppressed, and the remaining closes still run.
 */
public final class HeldResources implements AutoCloseable {
    private final Deque<AutoCloseable> held = new ArrayDeque<>();

    public <T extends AutoCloseable> T add(T resource) {
        held.push(resource);
        return resource;
    }

    @Override
    public void close() {
        RuntimeException first = null;
        while (!held.isEmpty()) {
            try {
                held.pop().close();
            } catch (Exception e) {
                RuntimeException failure = e instanceof RuntimeException r ? r : new IllegalStateException(e.getMessage(), e);
                if (first == null) {
                    first = failure;
                } else {
                    first.addSuppressed(failure);
                }
            }
        }
        if (first != null) {
            throw first;
        }
    }
}
