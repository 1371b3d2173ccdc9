output "host" {
  description = "Host Strata connects to: the proxy's endpoint when enabled, else the database's writer endpoint."
  value       = var.enable_proxy ? aws_db_proxy.this[0].endpoint : local.host
}

output "catalog_url" {
  description = "The value for STRATA_CATALOG, without the password (give it as PGPASSWORD, from secret_arn's \"password\" key): TLS with the server's certificate and host name verified (sslmode=verify-full), against the RDS CA bundle at ca_bundle_path, or the system's roots through RDS Proxy (whose certificate is a public ACM one)."
  value       = "postgres://${var.username}@${var.enable_proxy ? aws_db_proxy.this[0].endpoint : local.host}:5432/${var.database_name}?sslmode=verify-full&sslrootcert=${var.enable_proxy ? "system" : var.ca_bundle_path}"
}

output "secret_arn" {
  description = "ARN of the Secrets Manager secret holding username, password, host, port and dbname."
  value       = aws_secretsmanager_secret.master.arn
}

output "security_group_id" {
  description = "The database's security group."
  value       = aws_security_group.db.id
}
