package io.pagewire.tools.cli;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;

/**
 * A block of a markdown page that a command writes, between {@code <!-- generated: NAME -->} and
 * {@code <!-- end generated: NAME -->}: the command replaces what lies between them and leaves the rest
 * of the page (its prose) as it is.
 */
final class PageSection {
    private final Path page;
    private final String name;

    PageSection(Path page, String name) {
        this.page = page;
        this.name = name;
    }

    private String start() {
        return "<!-- generated: " + name + " -->";
    }

    private String end() {
        return "<!-- end generated: " + name + " -->";
    }

    /**
     * Checks, before a long run, that the page has the block.
     *
     * @throws IllegalArgumentException naming the markers the page lacks
     */
    void check() throws IOException {
        locate(read());
    }

    /** Replaces the block's content with {@code body}. */
    void write(String body) throws IOException {
        String text = read();
        int[] at = locate(text);
        String content = "\n" + body.strip() + "\n";
        Files.writeString(page, text.substring(0, at[0]) + content + text.substring(at[1]), StandardCharsets.UTF_8);
    }

    private String read() throws IOException {
        if (!Files.isRegularFile(page)) {
            throw new IllegalArgumentException("--page " + page + " is not a file");
        }
        return Files.readString(page, StandardCharsets.UTF_8);
    }

    /** Where the content starts (after the start marker's line) and ends (at the end marker). */
    private int[] locate(String text) {
        int start = text.indexOf(start());
        int end = text.indexOf(end());
        if (start < 0 || end < start || text.indexOf(start(), start + 1) >= 0) {
            throw new IllegalArgumentException(page + " has no block '" + start() + "' ... '" + end() + "' (once) for this command to write");
        }
        return new int[] {start + start().length(), end};
    }
}
