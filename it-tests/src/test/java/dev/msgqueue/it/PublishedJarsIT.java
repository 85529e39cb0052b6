package dev.msgqueue.it;

import static org.assertj.core.api.Assertions.assertThat;

import dev.msgqueue.MsgQueueRepository;
import dev.msgqueue.jooq.Tables;
import java.io.IOException;
import java.lang.module.ModuleDescriptor;
import java.lang.module.ModuleFinder;
import java.net.JarURLConnection;
import java.net.URL;
import java.nio.file.Path;
import java.util.jar.Attributes;
import java.util.jar.JarFile;
import org.junit.jupiter.api.Test;

/**
 * Each published jar names its module, so that services on the module path require a stable name rather than one
 * derived from the file name: core with a real module descriptor that exports the API package alone, the others in
 * their manifests. Runs against the jars Maven packaged (the integration-test phase).
 */
class PublishedJarsIT {

  @Test
  void coreIsAModuleThatExportsTheApiPackageAlone() throws Exception {
    Path jar = Path.of(((JarURLConnection) resource(MsgQueueRepository.class).openConnection()).getJarFileURL()
        .toURI());
    ModuleDescriptor core = ModuleFinder.of(jar).findAll().iterator().next().descriptor();

    assertThat(core.name()).isEqualTo("dev.msgqueue.core");
    assertThat(core.isAutomatic()).isFalse();
    assertThat(core.exports()).extracting(ModuleDescriptor.Exports::source).containsExactly("dev.msgqueue");
    assertThat(core.packages()).contains("dev.msgqueue.internal.sql", "dev.msgqueue.internal.maintenance");
  }

  @Test
  void theOtherPublishedJarsDeclareTheirAutomaticModuleNames() throws IOException {
    assertThat(automaticModuleName(resource(Tables.class))).isEqualTo("dev.msgqueue.codegen");
    assertThat(automaticModuleName(PublishedJarsIT.class.getClassLoader().getResource(Migrations.CHANGELOG)))
        .isEqualTo("dev.msgqueue.migrations");
  }

  private static URL resource(Class<?> type) {
    return type.getResource(type.getSimpleName() + ".class");
  }

  private static String automaticModuleName(URL resource) throws IOException {
    assertThat(resource.getProtocol()).as("%s comes from a packaged jar (run through mvn verify)", resource)
        .isEqualTo("jar");
    JarURLConnection connection = (JarURLConnection) resource.openConnection();
    connection.setUseCaches(false);
    try (JarFile jar = connection.getJarFile()) {
      return jar.getManifest().getMainAttributes().getValue(new Attributes.Name("Automatic-Module-Name"));
    }
  }
}
