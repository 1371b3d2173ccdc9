output "url" {
  description = "Base URL of the Strata API (the load balancer)."
  value       = "${var.certificate_arn == null ? "http" : "https"}://${aws_lb.this.dns_name}"
}

output "api_keys_secret_arn" {
  description = "ARN of the secret holding the API keys; null when keys are off."
  value       = var.api_key_count > 0 ? aws_secretsmanager_secret.api_keys[0].arn : null
}

output "cluster_name" {
  description = "Name of the ECS cluster."
  value       = aws_ecs_cluster.this.name
}

output "load_balancer_arn" {
  description = "ARN of the load balancer."
  value       = aws_lb.this.arn
}

output "kafka_bootstrap" {
  description = "host:port Kafka clients bootstrap at (bootstrap.servers); null unless kafka = true."
  value       = local.kafka_address
}

output "kafka_dns_name" {
  description = "DNS name of the Kafka Network Load Balancer, for an alias record matching the certificate; null unless kafka = true."
  value       = var.kafka ? aws_lb.kafka[0].dns_name : null
}
