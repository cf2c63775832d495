package io.pagewire.systemtests;

import java.util.ArrayList;
import java.util.List;
import java.util.logging.Handler;
import java.util.logging.Level;
import java.util.logging.LogRecord;
import java.util.logging.Logger;

/** Counts the log lines (WARNING and above) that anything in this JVM writes while it is open: what a fuzzer's input costs the log. */
public final class LogLines implements AutoCloseable {
    private final Logger root = Logger.getLogger("");
    private final List<LogRecord> records = new ArrayList<>();
    private final Handler handler = new Handler() {
        @Override
        public void publish(LogRecord record) {
            if (record.getLevel().intValue() >= Level.WARNING.intValue()) {
                synchronized (records) {
                    records.add(record);
                }
            }
        }

        @Override
        public void flush() {
        }

        @Override
        public void close() {
        }
    };

    public LogLines() {
        root.addHandler(handler);
    }

    /** Lines logged at WARNING or above so far. */
    public int count() {
        synchronized (records) {
            return records.size();
        }
    }

    /** Those that carried a stack trace, as "logger: message". */
    public List<String> withStackTraces() {
        synchronized (records) {
            return records.stream().filter(r -> r.getThrown() != null).map(r -> r.getLoggerName() + ": " + r.getMessage()).toList();
        }
    }

    /** The first few lines, for a failure's message. */
    public String sample() {
        synchronized (records) {
            return String.join("\n", records.stream().limit(10).map(r -> r.getLevel() + " " + r.getLoggerName() + ": " + r.getMessage()).toList());
        }
    }

    @Override
    public void close() {
        root.removeHandler(handler);
    }
}
