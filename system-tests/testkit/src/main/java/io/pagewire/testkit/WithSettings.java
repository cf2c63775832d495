package io.pagewire.testkit;

import java.lang.annotation.Documented;
import java.lang.annotation.ElementType;
import java.lang.annotation.Retention;
import java.lang.annotation.RetentionPolicy;
import java.lang.annotation.Target;

/**
 * Node settings for one test's cluster, on top of the extension's spec: {@code
 * @WithSettings({"pagewire.nic.tlbEntries=64", "pagewire.nic.tlbWays=4"})}. Only for a per-test
 * cluster ({@link PagewireClusterExtension} on an instance field); names are checked as
 * {@link ClusterSpec#set} checks them.
 */
@Documented
@Retention(RetentionPolicy.RUNTIME)
@Target(ElementType.METHOD)
public @interface WithSettings {
    /** "name=value" pairs. */
    String[] value();
}
