package dev.msgqueue.boottest;

import org.springframework.boot.autoconfigure.condition.ConditionalOnProperty;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.security.config.annotation.web.builders.HttpSecurity;
import org.springframework.security.web.SecurityFilterChain;

/**
 * Spring Security is on the tests' classpath for {@link ConsoleInServiceTest}, which runs the service with Boot's
 * default security (every request authenticated, CSRF on). Every other test runs the service as it is without
 * Spring Security: this chain opens every path and checks no CSRF token. Found by the service's component scan; a test
 * sets {@code boottest.default-security=true} to leave Boot's default chain in place.
 */
@Configuration(proxyBeanMethods = false)
@ConditionalOnProperty(name = "boottest.default-security", havingValue = "false", matchIfMissing = true)
class ServiceSecurity {
  @Bean
  SecurityFilterChain everythingOpen(HttpSecurity http) throws Exception {
    return http.authorizeHttpRequests(requests -> requests.anyRequest().permitAll())
        .csrf(csrf -> csrf.disable())
        .build();
  }
}
