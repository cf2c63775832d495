package io.pagewire.ring;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.channels.FileChannel;
import java.nio.channels.FileLock;
import java.nio.channels.OverlappingFileLockException;
import java.nio.file.AtomicMoveNotSupportedException;
import java.nio.file.DirectoryStream;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.nio.file.StandardOpenOption;
import java.nio.file.attribute.PosixFilePermissions;
import java.security.SecureRandom;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.HexFormat;
import java.util.List;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.stream.Stream;

/**
 * The directory in which one live owner (a node) keeps every file it shares with the applications on
 * its host (memory file, rings, page tables, verbs socket), and the lock that proves it lives: the
 * owner holds a lock on the directory's {@code lock} file for as long as it runs, and the kernel
 * releases it when the owner dies, however it dies. Any process that can take the lock therefore
 * knows the owner is dead and may remove the directory ({@link #removeDead}); a name proves nothing
 * (two nodes of one id on one host, a restarted node), the lock does.
 *
 * <pre>
 *   ring directory/
 *     pagewire-&lt;label&gt;-&lt;token&gt;.owner/     one per live owner, mode 0700
 *       lock                                  locked by the owner (fcntl, whole file) while it lives
 *       ... the owner's files
 *     pagewire-&lt;name&gt;.verbs -&gt; pagewire-...owner/verbs   names programs use; dangling once the owner is gone
 *
 *   label: the owner's name (a node's id, sanitised); token: 12 random hex digits.
 *   A directory is made as pagewire-&lt;label&gt;-&lt;token&gt;.claiming, locked, then renamed: an .owner
 *   directory whose lock can be taken, or that has no lock file, has a dead owner.
 * </pre>
 *
 * The lock is a POSIX record lock (what {@link FileChannel#tryLock} takes on Linux; C takes the same
 * with {@code fcntl(F_SETLK)} or {@code F_OFD_SETLK}, which conflict with it). A POSIX lock goes when its
 * process closes any descriptor of the file, so nothing in the owner's process ever opens another
 * owner's lock file that this process holds: the process keeps the set of its own live owners and
 * never tests those.
 */
public final class OwnerDirectory implements AutoCloseable {
    /** What an owner's directory name ends with. */
    public static final String SUFFIX = ".owner";
    private static final String CLAIMING_SUFFIX = ".claiming";
    private static final String LOCK_FILE = "lock";
    /** A directory still being claimed is left alone this long (a live owner renames it within microseconds). */
    private static final long CLAIM_GRACE_MS = 60_000;
    /** Owner directories this process holds the lock of (real paths): never tested, never removed by it. */
    private static final Set<Path> HELD = ConcurrentHashMap.newKeySet();
    private static final SecureRandom RANDOM = new SecureRandom();

    private final Path path;
    private final FileChannel lockChannel;
    private final FileLock lock;
    private volatile boolean closed;

    private OwnerDirectory(Path path, FileChannel lockChannel, FileLock lock) {
        this.path = path;
        this.lockChannel = lockChannel;
        this.lock = lock;
    }

    /**
     * Makes and locks a new owner directory in {@code ringDirectory}.
     *
     * @param label the owner's name, part of the directory's name so that a person can tell whose it is
     */
    public static OwnerDirectory claim(Path ringDirectory, String label) {
        String name = "pagewire-" + label.replaceAll("[^A-Za-z0-9_.-]", "_") + "-" + HexFormat.of().toHexDigits(RANDOM.nextLong()).substring(4);
        Path claiming = ringDirectory.resolve(name + CLAIMING_SUFFIX);
        Path path = ringDirectory.resolve(name + SUFFIX);
        FileChannel channel = null;
        try {
            try {
                Files.createDirectory(claiming, PosixFilePermissions.asFileAttribute(PosixFilePermissions.fromString("rwx------")));
            } catch (UnsupportedOperationException notPosix) {
                Files.createDirectory(claiming);
            }
            channel = FileChannel.open(claiming.resolve(LOCK_FILE), StandardOpenOption.CREATE_NEW, StandardOpenOption.WRITE);
            FileLock lock = channel.tryLock();
            if (lock == null) {
                throw new IOException("its lock file is locked by someone else");
            }
            try {
                Files.move(claiming, path, StandardCopyOption.ATOMIC_MOVE);
            } catch (AtomicMoveNotSupportedException e) {
                throw new IOException("the directory cannot be renamed atomically", e);
            }
            HELD.add(path.toRealPath());
            return new OwnerDirectory(path, channel, lock);
        } catch (IOException | RuntimeException e) {
            if (channel != null) {
                try {
                    channel.close();
                } catch (IOException ignored) {
                    // Closing what failed.
                }
            }
            deleteTree(claiming);
            throw new UncheckedIOException(new IOException("cannot make an owner directory in " + ringDirectory + ": " + e.getMessage(), e));
        }
    }

    /** The directory: the owner's files go here. */
    public Path path() {
        return path;
    }

    /** A file in the directory. */
    public Path resolve(String name) {
        return path.resolve(name);
    }

    /** Removes the directory with whatever the owner left in it, then gives the lock up. */
    @Override
    public void close() {
        if (closed) {
            return;
        }
        closed = true;
        try {
            HELD.remove(path.toRealPath());
        } catch (IOException e) {
            HELD.removeIf(p -> p.endsWith(path.getFileName()));
        }
        deleteTree(path);
        try {
            lock.release();
            lockChannel.close();
        } catch (IOException e) {
            // The descriptor goes with the process anyway.
        }
    }

    // ---- removing what dead owners left -----------------------------------------------------------

    /** What {@link #removeDead} did: the dead owners' directories removed, the files in them, and what it could not remove. */
    public record Removal(List<Path> owners, int files, long bytes, List<Path> links, List<String> failures) {
        public boolean isEmpty() {
            return owners.isEmpty() && links.isEmpty() && failures.isEmpty();
        }

        /** One line for a log or a person. */
        public String describe() {
            return "removed " + owners.size() + " dead owner" + (owners.size() == 1 ? "" : "s") + "' directories (" + files + " files, "
                    + bytes / 1024 + " KiB apparent size) and " + links.size() + " dangling link" + (links.size() == 1 ? "" : "s")
                    + (failures.isEmpty() ? "" : "; could not remove " + failures.size() + ": " + String.join("; ", failures));
        }
    }

    /**
     * Removes from {@code ringDirectory} every owner directory whose owner is dead (its lock can be
     * taken, or it never got one), and every {@code pagewire-*.verbs} link that leads nowhere; never a
     * live owner's. Nothing happens to files that are not an owner's (they are nobody's to remove).
     *
     * @param dryRun find them, remove nothing
     */
    public static Removal removeDead(Path ringDirectory, boolean dryRun) {
        List<Path> owners = new ArrayList<>();
        List<Path> links = new ArrayList<>();
        List<String> failures = new ArrayList<>();
        int[] files = {0};
        long[] bytes = {0};
        if (ringDirectory == null || !Files.isDirectory(ringDirectory)) {
            return new Removal(owners, 0, 0, links, failures);
        }
        try (DirectoryStream<Path> entries = Files.newDirectoryStream(ringDirectory, "pagewire-*")) {
            for (Path entry : entries) {
                String name = entry.getFileName().toString();
                if (Files.isSymbolicLink(entry)) {
                    continue; // links after the directories they may lead into
                }
                if (name.endsWith(SUFFIX) || name.endsWith(CLAIMING_SUFFIX)) {
                    try {
                        if (isDead(entry)) {
                            count(entry, files, bytes);
                            if (!dryRun) {
                                removeDeadOwner(entry);
                            }
                            owners.add(entry);
                        }
                    } catch (IOException | RuntimeException e) {
                        failures.add(entry + ": " + e.getMessage());
                    }
                }
            }
        } catch (IOException e) {
            failures.add(ringDirectory + ": " + e.getMessage());
        }
        try (DirectoryStream<Path> entries = Files.newDirectoryStream(ringDirectory, "pagewire-*.verbs")) {
            for (Path entry : entries) {
                try {
                    if (Files.isSymbolicLink(entry) && leadsNowhere(entry, dryRun ? owners : List.of())) {
                        if (!dryRun) {
                            Files.deleteIfExists(entry);
                        }
                        links.add(entry);
                    }
                } catch (IOException e) {
                    failures.add(entry + ": " + e.getMessage());
                }
            }
        } catch (IOException e) {
            failures.add(ringDirectory + ": " + e.getMessage());
        }
        return new Removal(owners, files[0], bytes[0], links, failures);
    }

    /** Whether a link's target is gone (or, in a dry run, inside a directory that would be removed). */
    private static boolean leadsNowhere(Path link, List<Path> removedOwners) throws IOException {
        if (!Files.exists(link)) {
            return true;
        }
        Path target = link.resolveSibling(Files.readSymbolicLink(link)).normalize();
        return removedOwners.stream().anyMatch(owner -> target.startsWith(owner.normalize()));
    }

    /** Whether an owner directory's owner is dead: its lock can be taken, or it has none to take. */
    private static boolean isDead(Path directory) throws IOException {
        if (!Files.isDirectory(directory, LinkOption.NOFOLLOW_LINKS)) {
            return false;
        }
        Path real = directory.toRealPath();
        if (HELD.contains(real)) {
            return false; // this process's own: testing it would drop the lock (see the class comment)
        }
        Path lockFile = directory.resolve(LOCK_FILE);
        if (!Files.exists(lockFile, LinkOption.NOFOLLOW_LINKS)) {
            // Being claimed (for microseconds), or its owner died before it could lock: old enough, dead.
            return System.currentTimeMillis() - Files.getLastModifiedTime(directory).toMillis() > CLAIM_GRACE_MS;
        }
        try (FileChannel channel = FileChannel.open(lockFile, StandardOpenOption.WRITE)) {
            FileLock lock = channel.tryLock();
            if (lock == null) {
                return false;
            }
            lock.release();
            // A .claiming directory whose lock was free an instant ago may be a live owner between
            // creating its lock file and taking the lock: only an old one is dead.
            return directory.getFileName().toString().endsWith(SUFFIX)
                    || System.currentTimeMillis() - Files.getLastModifiedTime(directory).toMillis() > CLAIM_GRACE_MS;
        } catch (OverlappingFileLockException heldHere) {
            return false;
        } catch (NoSuchFileException goneMeanwhile) {
            return false;
        }
    }

    /**
     * Removes a dead owner's directory while holding its lock, so that a second cleaner finds it
     * locked and leaves it; the lock file goes last.
     */
    private static void removeDeadOwner(Path directory) throws IOException {
        Path lockFile = directory.resolve(LOCK_FILE);
        if (!Files.exists(lockFile, LinkOption.NOFOLLOW_LINKS)) {
            deleteTree(directory);
            if (Files.exists(directory, LinkOption.NOFOLLOW_LINKS)) {
                throw new IOException("could not remove it (permissions?)");
            }
            return;
        }
        try (FileChannel channel = FileChannel.open(lockFile, StandardOpenOption.WRITE); FileLock lock = channel.tryLock()) {
            if (lock == null) {
                return; // another cleaner has it now
            }
            try (Stream<Path> all = Files.walk(directory)) {
                for (Path p : all.sorted(Comparator.reverseOrder()).toList()) {
                    if (!p.equals(lockFile) && !p.equals(directory)) {
                        Files.deleteIfExists(p);
                    }
                }
            }
            Files.deleteIfExists(lockFile);
            Files.deleteIfExists(directory);
        }
    }

    private static void count(Path directory, int[] files, long[] bytes) {
        try (Stream<Path> all = Files.walk(directory)) {
            all.filter(p -> Files.isRegularFile(p, LinkOption.NOFOLLOW_LINKS) && !p.getFileName().toString().equals(LOCK_FILE)).forEach(p -> {
                files[0]++;
                try {
                    bytes[0] += Files.size(p);
                } catch (IOException e) {
                    // Gone meanwhile.
                }
            });
        } catch (IOException | UncheckedIOException e) {
            // Counting is for the report only.
        }
    }

    private static void deleteTree(Path directory) {
        if (!Files.exists(directory, LinkOption.NOFOLLOW_LINKS)) {
            return;
        }
        try (Stream<Path> all = Files.walk(directory)) {
            for (Path p : all.sorted(Comparator.reverseOrder()).toList()) {
                SharedFiles.deleteQuietly(p);
            }
        } catch (IOException | UncheckedIOException e) {
            // What is left is a dead owner's: the next cleaner removes it.
        }
    }

    @Override
    public String toString() {
        return path.toString();
    }
}
