package io.pagewire.ring;

import java.io.IOException;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.Set;

/** How the node makes and removes the files it shares with applications: ring files, memory files, page tables. */
final class SharedFiles {
    private SharedFiles() {
    }

    /**
     * A new file (never one someone placed there first), readable and writable by the node's user
     * only: whoever maps it acts as the session, or reads every frame.
     */
    static FileChannel createOwnerOnly(Path path) throws IOException {
        try {
            return FileChannel.open(path, Set.of(StandardOpenOption.CREATE_NEW, StandardOpenOption.READ, StandardOpenOption.WRITE),
                    PosixFilePermissions.asFileAttribute(PosixFilePermissions.fromString("rw-------")));
        } catch (UnsupportedOperationException notPosix) {
            return FileChannel.open(path, StandardOpenOption.CREATE_NEW, StandardOpenOption.READ, StandardOpenOption.WRITE);
        }
    }

    /** Removes a file the node made; mappings of it stay valid until dropped. A leftover is harmless: names are never reused. */
    static void deleteQuietly(Path path) {
        try {
            Files.deleteIfExists(path);
        } catch (IOException e) {
            // Nothing to do: see above.
        }
    }
}
