package io.pagewire.examples;

import io.pagewire.client.Access;
import io.pagewire.client.ClientSecurity;
import io.pagewire.client.ConnectOptions;
import io.pagewire.client.Endpoint;
import io.pagewire.client.EventCounter;
import io.pagewire.client.MemoryRegion;
import io.pagewire.client.Pagewire;
import io.pagewire.client.QueuePair;
import io.pagewire.client.RegionStats;
import io.pagewire.client.RegistrationMode;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.time.Duration;
import java.util.EnumSet;

/** The README's first program: one application writes a message into another's memory on another node and is told when it is there. */
public final class FirstProgram {
    private FirstProgram() {
    }

    /** What the receiver found, and what its region's counters say the write cost it. */
    public record Result(String message, RegionStats target) {
    }

    /** {@code FirstProgram HOST:PORT HOST:PORT CERTS_DIR}: the two nodes, and the certificates of {@code pagewire certs} (as "app"). */
    public static void main(String[] args) {
        if (args.length != 3) {
            System.err.println("usage: FirstProgram HOST:PORT HOST:PORT CERTS_DIR");
            System.exit(2);
        }
        ConnectOptions options = ConnectOptions.defaults().withSecurity(ClientSecurity.mutualTls(Path.of(args[2]), "app"));
        Result result = run(args[0], args[1], options);
        System.out.println(result.message() + "; " + result.target());
    }

    public static Result run(String first, String second, ConnectOptions options) {
        byte[] message = "hello, pagewire".getBytes(StandardCharsets.US_ASCII);
        try (Pagewire a = Pagewire.connect(first, options); Pagewire b = Pagewire.connect(second, options)) {
            Endpoint sender = a.openEndpoint("sender");            // an application on the first node: its own address space
            Endpoint receiver = b.openEndpoint("receiver");        // and one on the second
            long src = sender.allocate(1 << 20);                   // virtual memory; frames at first touch
            sender.store(src, message);
            MemoryRegion local = sender.register(src, 1 << 20, RegistrationMode.ON_DEMAND, Access.all());
            long dst = receiver.allocate(1 << 20);
            MemoryRegion remote = receiver.register(dst, 1 << 20, RegistrationMode.SHADOW, Access.all());
            EventCounter arrived = receiver.createEventCounter(EnumSet.of(Access.REMOTE_WRITE));
            QueuePair qp = sender.connect(receiver);               // a queue pair on each side, connected
            qp.await(qp.writeWithNotify(local, src, message.length, dst, remote.rkey(), arrived.id()));
            arrived.await(1, Duration.ofSeconds(5));               // the data is visible once the counter moves
            return new Result(new String(receiver.load(dst, message.length), StandardCharsets.US_ASCII), remote.stats());
        }
    }
}
