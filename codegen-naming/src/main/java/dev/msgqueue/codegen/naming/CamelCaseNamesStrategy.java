package dev.msgqueue.codegen.naming;

import org.jooq.codegen.DefaultGeneratorStrategy;
import org.jooq.meta.ColumnDefinition;
import org.jooq.meta.Definition;
import org.jooq.meta.EnumDefinition;
import org.jooq.meta.TableDefinition;
import org.jooq.tools.StringUtils;

/**
 * The production schema names things in quoted camel case ("MessageQueueItem", "queueId"), which jOOQ's default
 * strategy flattens ("Messagequeueitem", "getQueueid"). This strategy reads camel humps as word breaks, so the typed
 * tables read naturally: {@code MESSAGE_QUEUE_ITEM.QUEUE_ID}, {@code MessageQueueItemRecord.getQueueId()}.
 */
public final class CamelCaseNamesStrategy extends DefaultGeneratorStrategy {

  @Override
  public String getJavaIdentifier(Definition definition) {
    if (isCamelCaseNamed(definition)) {
      return snakeCase(definition.getOutputName()).toUpperCase(java.util.Locale.ROOT);
    }
    return super.getJavaIdentifier(definition);
  }

  @Override
  public String getJavaClassName(Definition definition, Mode mode) {
    return withCamelHumps(definition, super.getJavaClassName(definition, mode));
  }

  @Override
  public String getJavaMemberName(Definition definition, Mode mode) {
    return withCamelHumps(definition, super.getJavaMemberName(definition, mode));
  }

  @Override
  public String getJavaGetterName(Definition definition, Mode mode) {
    return withCamelHumps(definition, super.getJavaGetterName(definition, mode));
  }

  @Override
  public String getJavaSetterName(Definition definition, Mode mode) {
    return withCamelHumps(definition, super.getJavaSetterName(definition, mode));
  }

  @Override
  public String getJavaMethodName(Definition definition, Mode mode) {
    return withCamelHumps(definition, super.getJavaMethodName(definition, mode));
  }

  private static boolean isCamelCaseNamed(Definition definition) {
    // Keys and indexes keep jOOQ's default identifiers: the generator refers to them through several definition
    // types, and renaming only some of those references breaks the generated code.
    return definition instanceof TableDefinition || definition instanceof ColumnDefinition
        || definition instanceof EnumDefinition;
  }

  /** Replaces the default strategy's flattened rendering of the name with one that keeps its humps. */
  private static String withCamelHumps(Definition definition, String defaultName) {
    if (!isCamelCaseNamed(definition)) {
      return defaultName;
    }
    String snake = snakeCase(definition.getOutputName());
    String flattenedUpper = StringUtils.toCamelCase(definition.getOutputName());
    String humpedUpper = StringUtils.toCamelCase(snake);
    if (defaultName.contains(flattenedUpper)) {
      return defaultName.replace(flattenedUpper, humpedUpper);
    }
    String flattenedLower = StringUtils.toCamelCaseLC(definition.getOutputName());
    String humpedLower = StringUtils.toCamelCaseLC(snake);
    return defaultName.startsWith(flattenedLower)
        ? humpedLower + defaultName.substring(flattenedLower.length())
        : defaultName;
  }

  private static String snakeCase(String name) {
    return name.replaceAll("([a-z0-9])([A-Z])", "$1_$2").toLowerCase(java.util.Locale.ROOT);
  }
}
