output "host" {
  description = "Host Strata connects to: the proxy's endpoint when enabled, else the database's writer endpoint."
  value       = var.enable_proxy ? aws_db_proxy.this[0].endpoint : local.host
}

output "catalog_url" {
  description = "The value for STRATA_CATALOG, without the password (give it as PGPASSWORD, from secret_arn's \"password\" key)."
  value       = "postgres://${var.username}@${var.enable_proxy ? aws_db_proxy.this[0].endpoint : local.host}:5432/${var.database_name}?sslmode=require"
}

output "secret_arn" {
  description = "ARN of the Secrets Manager secret holding username, password, host, port and dbname."
  value       = aws_secretsmanager_secret.master.arn
}

output "password" {
  description = "The generated password, for compute that cannot read Secrets Manager at start (Lambda environment)."
  value       = random_password.master.result
  sensitive   = true
}

output "security_group_id" {
  description = "The database's security group."
  value       = aws_security_group.db.id
}
