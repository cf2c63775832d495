package io.pagewire.client;

/**
 * What a peer needs to connect a queue pair to this one, exchanged out of band as with ibverbs. Its
 * text form, {@code node-2/7/32/4096} (node, queue pair number, credits, page size), can be passed
 * between processes on a command line or in a file.
 */
public record QpAddress(String nodeId, int qpn, int initialCredits, int pageSize) {
    @Override
    public String toString() {
        return nodeId + "/" + qpn + "/" + initialCredits + "/" + pageSize;
    }

    /** Parses the text form; the message says what was wrong. */
    public static QpAddress parse(String text) {
        String[] parts = text.trim().split("/");
        if (parts.length != 4 || parts[0].isEmpty()) {
            throw new IllegalArgumentException("a queue pair address is node/qpn/credits/pageSize (e.g. node-2/7/32/4096), was '" + text + "'");
        }
        try {
            return new QpAddress(parts[0], Integer.parseInt(parts[1]), Integer.parseInt(parts[2]), Integer.parseInt(parts[3]));
        } catch (NumberFormatException e) {
            throw new IllegalArgumentException("a queue pair address is node/qpn/credits/pageSize with numbers after the node, was '"
                    + text + "'");
        }
    }
}
